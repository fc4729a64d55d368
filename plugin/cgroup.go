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

// Gone tells whether a sandbox's cgroup is absent, which it is once the
// runtime stopped the sandbox, but also when the root is not the node's
// cgroup tree (a wrong cgroupRoot, a container without the node's cgroup
// mount): the caller trusts an absence only once Exists has seen a live
// sandbox's cgroup under the same root. A sandbox without a cgroup path,
// or one that cannot be checked, is not known to be gone.
func (c *cgroupPinner) Gone(cgroupsPath string) bool {
	_, err := c.stat(cgroupsPath)
	return errors.Is(err, fs.ErrNotExist)
}

// Exists tells whether a sandbox's cgroup is there.
func (c *cgroupPinner) Exists(cgroupsPath string) bool {
	fi, err := c.stat(cgroupsPath)
	return err == nil && fi.IsDir()
}

func (c *cgroupPinner) stat(cgroupsPath string) (fs.FileInfo, error) {
	dir, err := cgroupDir(cgroupsPath)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.root, dir)
	if !c.unified {
		path = cgroup1.NewCpuset(c.root).Path(dir)
	}
	return os.Stat(path)
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

// errNoPodCgroup means a pod has no cgroup of its own to lift the quota
// of: a runtime that reports none, or one not under the plugin's root.
var errNoPodCgroup = errors.New("no such pod cgroup")

// errNoCPUController means a pod cgroup has no CFS quota to lift: the cpu
// controller is not enabled for it (v2) or not mounted (v1).
var errNoCPUController = errors.New("pod cgroup has no cpu controller")

// podCgroupDir converts a pod's cgroup parent (NRI's
// PodSandbox.Linux.CgroupParent) to a directory relative to the hierarchy.
// The systemd driver names it by its slice alone
// ("kubepods-burstable-pod1.slice"), which expands as systemd lays slices
// out; cgroupfs paths are used as they are. The root is never a pod's
// cgroup: a parent that names it has no pod cgroup to lift.
func podCgroupDir(parent string) (string, error) {
	dir := filepath.Clean("/" + parent)
	if !strings.Contains(parent, "/") && strings.HasSuffix(parent, ".slice") {
		var err error
		if dir, err = expandSlice(parent); err != nil {
			return "", err
		}
	}
	if dir == "/" {
		return "", errNoPodCgroup
	}
	return dir, nil
}

// LiftQuota lifts the CFS quota of a pod's cgroup, given its cgroup parent:
// "max" in cpu.max on v2, keeping the period the kubelet set, or -1 in
// cpu.cfs_quota_us of the cpu hierarchy on v1. It returns the file and the
// quota it found there, or was "" when the quota was lifted already and
// nothing was written (each pin round calls it again). A cgroup that is not
// there is errNoPodCgroup, one without the cpu controller errNoCPUController.
//
// Plain files rather than containerd/cgroups: the file is read first anyway
// (to keep the period and to skip a lifted quota), cgroup2's CPUMax needs
// the period spelled out, and cgroup1's cpu controller looks only under
// "cpu", not "cpu,cpuacct".
func (c *cgroupPinner) LiftQuota(parent string) (file, was string, err error) {
	dir, err := podCgroupDir(parent)
	if err != nil {
		return "", "", err
	}
	if c.unified {
		return liftQuotaIn(filepath.Join(c.root, dir), "cpu.max", func(old string) (string, bool) {
			f := strings.Fields(old)
			if len(f) == 0 || f[0] == "max" {
				return "", false
			}
			if len(f) > 1 {
				return "max " + f[1], true
			}
			return "max", true
		})
	}
	for _, ctl := range []string{"cpu", "cpu,cpuacct"} {
		if _, err := os.Stat(filepath.Join(c.root, ctl)); err != nil {
			continue
		}
		return liftQuotaIn(filepath.Join(c.root, ctl, dir), "cpu.cfs_quota_us", func(old string) (string, bool) {
			return "-1", old != "-1"
		})
	}
	return "", "", errNoCPUController
}

// liftQuotaIn reads a cgroup's quota file and writes what lift makes of
// it, if anything. It never creates a file.
func liftQuotaIn(dir, name string, lift func(old string) (string, bool)) (string, string, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", "", errNoPodCgroup
	}
	file := filepath.Join(dir, name)
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", errNoCPUController
	}
	if err != nil {
		return file, "", fmt.Errorf("reading CFS quota: %w", err)
	}
	old := strings.TrimSpace(string(b))
	value, ok := lift(old)
	if !ok {
		return file, "", nil
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return file, old, fmt.Errorf("lifting CFS quota %q: %w", old, err)
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return file, old, fmt.Errorf("lifting CFS quota %q: writing %q: %w", old, value, err)
	}
	return file, old, nil
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

// CPUs reads the cpuset.cpus of a cgroup, errNoCgroup if it is not there.
// An empty file (cgroup v2: the parent's CPUs) reads as an empty set.
func (c *cgroupPinner) CPUs(cgroupsPath string) (cpuset.CPUSet, error) {
	dir, err := cgroupDir(cgroupsPath)
	if err != nil {
		return cpuset.New(), err
	}
	path := filepath.Join(c.root, dir, "cpuset.cpus")
	if !c.unified {
		path = filepath.Join(cgroup1.NewCpuset(c.root).Path(dir), "cpuset.cpus")
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cpuset.New(), errNoCgroup
	}
	if err != nil {
		return cpuset.New(), err
	}
	return cpuset.Parse(strings.TrimSpace(string(b)))
}
