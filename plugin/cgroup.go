package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"
)

// errNoCgroup means the sandbox has no cgroup of its own (a sandbox already
// gone, a runtime that creates none); there is nothing to pin. CRI-O's pods
// without an infra container (drop_infra_ctr) do have one, empty, and it is
// pinned like any other.
var errNoCgroup = errors.New("sandbox has no cgroup")

// cgroupPinner writes cpusets into pod sandbox cgroups below a root, on the
// cgroup v1 (cpuset controller) or v2 (unified) hierarchy.
type cgroupPinner struct {
	root    string
	unified bool
}

func newCgroupPinner(root string) *cgroupPinner {
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return &cgroupPinner{root: root, unified: err == nil}
}

// Hierarchy names the layout found, for logs.
func (c *cgroupPinner) Hierarchy() string {
	if c.unified {
		return "cgroup v2 (unified) at " + c.root
	}
	return "cgroup v1 at " + c.root
}

// cgroupDir converts a runtime's cgroups path to a directory relative to
// the hierarchy: cgroupfs paths are used as they are, systemd paths
// ("kubepods-burstable-pod1.slice:cri-containerd:ID") are expanded the way
// systemd lays out slices.
func cgroupDir(cgroupsPath string) (string, error) {
	if cgroupsPath == "" {
		return "", errNoCgroup
	}
	parts := strings.Split(cgroupsPath, ":")
	if len(parts) != 3 || strings.HasPrefix(cgroupsPath, "/") {
		return filepath.Clean("/" + cgroupsPath), nil
	}
	slice, prefix, name := parts[0], parts[1], parts[2]
	dir, err := expandSlice(slice)
	if err != nil {
		return "", err
	}
	unit := name
	if !strings.HasSuffix(name, ".slice") {
		unit = prefix + "-" + name + ".scope"
	}
	return filepath.Join(dir, unit), nil
}

// expandSlice turns "a-b-c.slice" into "/a.slice/a-b.slice/a-b-c.slice".
func expandSlice(slice string) (string, error) {
	if slice == "" || slice == "-.slice" {
		return "/", nil
	}
	name, ok := strings.CutSuffix(slice, ".slice")
	if !ok || strings.Contains(name, "/") {
		return "", fmt.Errorf("invalid systemd slice %q", slice)
	}
	path, prefix := "", ""
	for _, comp := range strings.Split(name, "-") {
		if comp == "" {
			return "", fmt.Errorf("invalid systemd slice %q", slice)
		}
		path += "/" + prefix + comp + ".slice"
		prefix += comp + "-"
	}
	return path, nil
}

// Gone tells whether a sandbox's cgroup is known to have been removed,
// which the runtime does when it stops the sandbox. A sandbox without a
// cgroup path, or one that cannot be checked, is not known to be gone.
func (c *cgroupPinner) Gone(cgroupsPath string) bool {
	dir, err := cgroupDir(cgroupsPath)
	if err != nil {
		return false
	}
	path := filepath.Join(c.root, dir)
	if !c.unified {
		path = cgroup1.NewCpuset(c.root).Path(dir)
	}
	_, err = os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// Pin writes cpus (and mems, if not empty) into the sandbox's cgroup. It
// never creates a cgroup: a missing one is errNoCgroup.
func (c *cgroupPinner) Pin(cgroupsPath string, cpus, mems cpuset.CPUSet) error {
	dir, err := cgroupDir(cgroupsPath)
	if err != nil {
		return err
	}
	if c.unified {
		if _, err := os.Stat(filepath.Join(c.root, dir)); errors.Is(err, fs.ErrNotExist) {
			return errNoCgroup
		}
		m, err := cgroup2.Load(dir, cgroup2.WithMountpoint(c.root))
		if err != nil {
			return fmt.Errorf("loading cgroup %s: %w", dir, err)
		}
		res := &cgroup2.Resources{CPU: &cgroup2.CPU{Cpus: cpus.String()}}
		if mems.Size() > 0 {
			res.CPU.Mems = mems.String()
		}
		if err := m.Update(res); err != nil {
			return fmt.Errorf("writing cpuset of cgroup %s: %w", filepath.Join(c.root, dir), err)
		}
		return nil
	}
	ctl := cgroup1.NewCpuset(c.root)
	if _, err := os.Stat(ctl.Path(dir)); errors.Is(err, fs.ErrNotExist) {
		return errNoCgroup
	}
	res := &specs.LinuxResources{CPU: &specs.LinuxCPU{Cpus: cpus.String()}}
	if mems.Size() > 0 {
		res.CPU.Mems = mems.String()
	}
	if err := ctl.Update(dir, res); err != nil {
		return fmt.Errorf("writing cpuset of cgroup %s: %w", ctl.Path(dir), err)
	}
	return nil
}

// setAffinity pins a process (the sandbox's pause process) to cpus.
func setAffinity(pid uint32, cpus cpuset.CPUSet) error {
	var mask unix.CPUSet
	for _, id := range cpus.List() {
		mask.Set(id)
	}
	if err := unix.SchedSetaffinity(int(pid), &mask); err != nil {
		return fmt.Errorf("sched_setaffinity(%d, %s): %w", pid, cpus, err)
	}
	return nil
}
