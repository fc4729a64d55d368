package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"k8s.io/utils/cpuset"
)

// Locality is where a device sits: its NUMA node (Unknown when the
// firmware does not say) and the CPUs local to it.
type Locality struct {
	Device string        `json:"device"`
	NUMA   int           `json:"numa"`
	CPUs   cpuset.CPUSet `json:"-"`
}

// DeviceLocality resolves a sysfs device path — a PCI function
// (/sys/bus/pci/devices/0000:3b:00.0), a class device (/sys/class/net/eth0)
// or a device number link (/sys/dev/char/226:128) — below root and returns
// its NUMA node and local CPUs. Class and number links are followed to the
// parent device that carries numa_node.
func DeviceLocality(root, devicePath string) (Locality, error) {
	r := reader{root: root}
	rel := strings.TrimPrefix(filepath.Clean("/"+devicePath), "/")
	if !strings.HasPrefix(rel, "sys/") {
		return Locality{}, fmt.Errorf("device %q: not a sysfs path (want /sys/bus/pci/devices/..., /sys/class/... or /sys/dev/...)", devicePath)
	}
	if _, err := os.Stat(r.path(rel)); err != nil {
		// The path as given: the root (simulate's temporary rendering of
		// a topology) is no part of the user's input.
		if errors.Is(err, fs.ErrNotExist) {
			return Locality{}, fmt.Errorf("device %q does not exist on this node", devicePath)
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Locality{}, fmt.Errorf("device %q: %w", devicePath, err)
	}
	// A class device has numa_node only through its "device" link; walk
	// up at most a few levels, the way udev does for attributes.
	candidates := []string{rel, rel + "/device", rel + "/device/device"}
	for _, c := range candidates {
		node, ok, err := r.integer(c + "/numa_node")
		if err != nil {
			return Locality{}, err
		}
		if !ok {
			continue
		}
		loc := Locality{Device: devicePath, NUMA: int(node)}
		if node < 0 {
			loc.NUMA = Unknown
		}
		cpus, _, err := r.list(c + "/local_cpulist")
		if err != nil {
			return Locality{}, err
		}
		loc.CPUs = cpus
		return loc, nil
	}
	return Locality{Device: devicePath, NUMA: Unknown, CPUs: cpuset.New()},
		fmt.Errorf("device %q: no numa_node found at %s or its parent device", devicePath, r.path(rel))
}

// DeviceNUMAResolver returns a function giving the NUMA node of a sysfs
// device path below root (Unknown when the firmware does not say): the
// resolver the allocator's policy takes for the device annotation.
func DeviceNUMAResolver(root string) func(devicePath string) (int, error) {
	return func(devicePath string) (int, error) {
		loc, err := DeviceLocality(root, devicePath)
		return loc.NUMA, err
	}
}

// DeviceNodeLocality finds the locality of a /dev node given its type ('c'
// or 'b'), major and minor numbers, as the runtime reports a container's
// devices. VFIO group nodes (/dev/vfio/N) are resolved through their IOMMU
// group, since their char device has no parent device.
func DeviceNodeLocality(root string, devPath string, typ string, major, minor int64) (Locality, error) {
	devPath = filepath.Clean("/" + devPath)
	if g, ok := strings.CutPrefix(devPath, "/dev/vfio/"); ok && g != "vfio" {
		// The group is a number: anything else ("..", "/") would walk out
		// of the IOMMU groups.
		if !isDigits(g) {
			return Locality{}, fmt.Errorf("device %s: not a VFIO group (/dev/vfio/<number>)", cpulist.Echo(devPath))
		}
		r := reader{root: root}
		dir := "sys/kernel/iommu_groups/" + g + "/devices"
		entries, err := os.ReadDir(r.path(dir))
		if err != nil {
			return Locality{}, fmt.Errorf("device %s: reading IOMMU group: %w", devPath, err)
		}
		for _, e := range entries {
			loc, err := DeviceLocality(root, "/"+dir+"/"+e.Name())
			if err == nil && loc.NUMA != Unknown {
				loc.Device = devPath
				return loc, nil
			}
		}
		return Locality{}, fmt.Errorf("device %s: no device of IOMMU group %s reports a NUMA node", devPath, g)
	}
	kind := "char"
	if typ == "b" {
		kind = "block"
	}
	loc, err := DeviceLocality(root, fmt.Sprintf("/sys/dev/%s/%d:%d", kind, major, minor))
	loc.Device = devPath
	return loc, err
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
