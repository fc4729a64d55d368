package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// Why a thread is still foreign on a held CPU (Thread.Kind), after
// housekeeping confinement (pools.<pool>.housekeeping) narrowed the host's
// cgroups, or without it.
const (
	// ForeignOwnAffinity: a process that set its own affinity, narrower
	// than its cgroup's CPUs. Confinement by affinity (cgroup v1, TuneD)
	// does not reach it, and a cgroup's CPUs reach it only while they are
	// narrower still.
	ForeignOwnAffinity = "ownAffinity"
	// ForeignCgroup: its cgroup's CPUs include the held CPU: the cgroup is
	// not confined (housekeeping off, a systemd slice, cgroup v1, ...).
	ForeignCgroup = "cgroup"
	// ForeignRootCgroup: it runs in the root cgroup, whose CPUs cannot be
	// changed.
	ForeignRootCgroup = "rootCgroup"
	// ForeignNoCpuset: its cgroup's CPUs could not be read (cgroup v1, or
	// no cpuset controller down to it).
	ForeignNoCpuset = "noCpuset"
	// KernelManaged: a kernel thread whose affinity the kernel keeps to
	// itself (PF_NO_SETAFFINITY: a workqueue worker follows the workqueue
	// mask).
	KernelManaged = "kernelManaged"
	// KernelUnbound: an unbound kernel thread whose affinity could be
	// changed, which this version does not do (issue 32).
	KernelUnbound = "kernelUnbound"
)

// pfNoSetAffinity is the kernel's PF_NO_SETAFFINITY flag in
// /proc/<pid>/stat: userland may not change the thread's affinity.
const pfNoSetAffinity = 0x04000000

// cgroupCPUs reads the CPUs of cgroup v2 paths (cpuset.cpus.effective),
// once each.
type cgroupCPUs struct {
	root  string
	cache map[string]*cpuset.CPUSet
}

func newCgroupCPUs(root string) *cgroupCPUs {
	return &cgroupCPUs{root: root, cache: map[string]*cpuset.CPUSet{}}
}

// of is the effective CPUs of path, nil when unknown.
func (c *cgroupCPUs) of(path string) *cpuset.CPUSet {
	if set, ok := c.cache[path]; ok {
		return set
	}
	var set *cpuset.CPUSet
	if c.root != "" {
		if data, err := os.ReadFile(filepath.Join(c.root, path, "cpuset.cpus.effective")); err == nil {
			if s, err := cpulist.Parse(string(data)); err == nil && !s.IsEmpty() {
				set = &s
			}
		}
	}
	c.cache[path] = set
	return set
}

// unifiedPath is a task's cgroup v2 path ("0::/system.slice/x.service"),
// "" when it has none (cgroup v1).
func unifiedPath(cgroup string) string {
	for _, line := range strings.Split(cgroup, "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return strings.TrimSpace(path)
		}
	}
	return ""
}

// foreignReason says why a user-space thread of another process may run
// on held CPU cpu: its kind and a line for people.
func foreignReason(t task, cpu int, cgroups *cgroupCPUs) (kind, why string) {
	path := unifiedPath(t.cgroup)
	var cg *cpuset.CPUSet
	if path != "" {
		cg = cgroups.of(path)
	}
	switch {
	case cg == nil:
		where := "its cgroup"
		if path != "" {
			where = "its cgroup " + path
		}
		return ForeignNoCpuset, fmt.Sprintf("%s has no cpuset to confine it (cgroup v1, or no cpuset controller down to it)", where)
	case t.allowed.IsSubsetOf(*cg) && !t.allowed.Equals(*cg):
		return ForeignOwnAffinity, fmt.Sprintf("its own affinity (%s, narrower than its cgroup's CPUs %s) includes CPU %d", t.allowed, *cg, cpu)
	case path == "/":
		return ForeignRootCgroup, fmt.Sprintf("it runs in the root cgroup, whose CPUs (%s) cannot be narrowed", *cg)
	}
	return ForeignCgroup, fmt.Sprintf("its cgroup %s allows CPU %d (CPUs %s): not confined", path, cpu, *cg)
}

// kernelReason says why an unbound kernel thread may run on a held CPU.
func kernelReason(t task) (kind, why string) {
	if t.flags&pfNoSetAffinity != 0 {
		return KernelManaged, "the kernel manages its affinity (PF_NO_SETAFFINITY; a workqueue worker follows the workqueue mask)"
	}
	return KernelUnbound, "an unbound kernel thread; this version does not change kernel threads' affinity (issue 32)"
}
