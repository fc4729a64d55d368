package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// Why a thread is still foreign on a held CPU (Thread.Kind), after
// housekeeping confinement (pools.<pool>.housekeeping) narrowed the host's
// cgroups (cgroup v2) or threads' affinity (cgroup v1, kernel threads), or
// without it.
const (
	// ForeignOwnAffinity: a process with an affinity of its own: on cgroup
	// v2, narrower than its cgroup's CPUs, which reach it only while they
	// are narrower still; on cgroup v1, where housekeeping confines by
	// affinity, not every CPU of the host: a process pinned to kept CPUs
	// keeps them, and one that set its affinity since the last pass is
	// narrowed at the next.
	ForeignOwnAffinity = "ownAffinity"
	// ForeignCgroup: its cgroup's CPUs include the held CPU: the cgroup is
	// not confined (housekeeping off, systemd's API unreachable, ...).
	ForeignCgroup = "cgroup"
	// ForeignIsolcpusReset: the held CPU is an isolcpus= CPU, which PID
	// 1's affinity leaves out, yet its cgroup v2 cgroup allows it: the
	// runtime enabled the cpuset controller at the root, the kernel reset
	// the affinity of the cgroup's tasks to its CPUs (every CPU), and an
	// isolated CPU has no scheduling domain that would balance a task
	// away. keepHostOffIsolcpus (on by default) confines the host's
	// cgroups: off, or its first pass has not run.
	ForeignIsolcpusReset = "isolcpusAffinityReset"
	// ForeignRootCgroup: it runs in the root cgroup, whose CPUs cannot be
	// changed.
	ForeignRootCgroup = "rootCgroup"
	// ForeignNoCpuset: its cgroup's CPUs could not be read (cgroup v1, or
	// no cpuset controller down to it), and its affinity is every CPU of
	// the host: housekeeping has not narrowed it (off for the CPU's pool,
	// or its first pass has not run).
	ForeignNoCpuset = "noCpuset"
	// ForeignRefused: the kernel refused to narrow its affinity (the
	// journal's refusals): EINVAL when its cpuset allows none of the
	// housekeeping CPUs, EPERM without the privilege.
	ForeignRefused = "refused"
	// KernelManaged: a kernel thread whose affinity the kernel keeps to
	// itself (PF_NO_SETAFFINITY: a workqueue worker follows the workqueue
	// mask).
	KernelManaged = "kernelManaged"
	// KernelUnbound: an unbound kernel thread whose affinity the kernel
	// refused to narrow (the journal's refusals).
	KernelUnbound = "kernelUnbound"
	// KernelNotConfined: an unbound kernel thread housekeeping has not
	// narrowed: off for the CPU's pool, or its first pass has not run.
	KernelNotConfined = "kernelNotConfined"
)

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
// on held CPU cpu: its kind and a line for people. host are the CPUs a
// host process has when nothing confines it (online, not isolated);
// isolated says that cpu is an isolcpus= CPU; refused the kernel's
// refusals of affinities, by thread id.
func foreignReason(t task, cpu int, isolated bool, cgroups *cgroupCPUs, host cpuset.CPUSet, refused map[int]string) (kind, why string) {
	if r, ok := refused[t.tid]; ok {
		return ForeignRefused, "the kernel refused to narrow its affinity: " + r
	}
	path := unifiedPath(t.cgroup)
	var cg *cpuset.CPUSet
	if path != "" {
		cg = cgroups.of(path)
	}
	switch {
	case cg == nil && path == "" && !host.IsEmpty() && !t.allowed.Equals(host):
		return ForeignOwnAffinity, fmt.Sprintf("its own affinity (%s, not every CPU of the host, %s) includes CPU %d: a process pinned to kept CPUs keeps them, and one that set its affinity since the last pass is narrowed at the next", t.allowed, host, cpu)
	case cg == nil:
		where := "its cgroup"
		if path != "" {
			where = "its cgroup " + path
		}
		return ForeignNoCpuset, fmt.Sprintf("%s has no cpuset to confine it (cgroup v1, or no cpuset controller down to it), and its affinity is not narrowed (housekeeping off for this CPU's pool, or its first pass has not run)", where)
	case t.allowed.IsSubsetOf(*cg) && !t.allowed.Equals(*cg):
		return ForeignOwnAffinity, fmt.Sprintf("its own affinity (%s, narrower than its cgroup's CPUs %s) includes CPU %d", t.allowed, *cg, cpu)
	case path == "/":
		return ForeignRootCgroup, fmt.Sprintf("it runs in the root cgroup, whose CPUs (%s) cannot be narrowed", *cg)
	case isolated:
		// isolcpus= should have kept it off: say what undid that.
		return ForeignIsolcpusReset, fmt.Sprintf("CPU %d is an isolcpus= CPU, which PID 1's affinity leaves out, but its cgroup %s allows it (CPUs %s): "+
			"on cgroup v2 the runtime enables the cpuset controller at the root, the kernel then resets the affinity of the cgroup's tasks to its CPUs, "+
			"and an isolated CPU has no scheduling domain that balances a task away; keepHostOffIsolcpus (on by default) keeps the host's cgroups off it: turned off, or its first pass has not run", cpu, path, *cg)
	}
	return ForeignCgroup, fmt.Sprintf("its cgroup %s allows CPU %d (CPUs %s): not confined", path, cpu, *cg)
}

// kernelReason says why an unbound kernel thread may run on a held CPU.
func kernelReason(t task, refused map[int]string) (kind, why string) {
	if t.pinned {
		return KernelManaged, "the kernel manages its affinity (PF_NO_SETAFFINITY; a workqueue worker follows the workqueue mask)"
	}
	if r, ok := refused[t.tid]; ok {
		return KernelUnbound, "an unbound kernel thread whose affinity the kernel refused to narrow: " + r
	}
	return KernelNotConfined, "an unbound kernel thread that housekeeping has not narrowed (off for this CPU's pool, or its first pass has not run)"
}

// refusedThreads are the journal's refusals of thread affinities
// (housekeeping.AffinityRoot), by thread id.
func refusedThreads(refused map[string]string) map[int]string {
	out := map[int]string{}
	for path, why := range refused {
		if tid, _, ok := housekeeping.AffinityThread(path); ok {
			out[tid] = why
		}
	}
	return out
}
