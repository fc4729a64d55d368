package plugin

// Exclusive containers that also run on the shared pool
// (shared-cpus.cpupool.dev; allocator/withshared.go): their record keeps
// the exclusive part as CPUs and the shared part beside it, and what the
// runtime applies is both.

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/state"
)

// sharedPart is the shared part of an assignment for its record, "" for
// a container without one.
func sharedPart(a allocator.Assignment) string {
	if !a.WithShared {
		return ""
	}
	return cpulist.Format(a.Shared)
}

// cpusetOf is a recorded container's cpuset as the runtime applies it.
// Both lists were written by the plugin from sets (containerState), so
// they parse; a container without a shared part costs nothing.
func cpusetOf(st state.ContainerState) string {
	if !st.WithShared || st.SharedCPUs == "" {
		return st.CPUs
	}
	excl, err1 := cpulist.Parse(st.CPUs)
	shared, err2 := cpulist.Parse(st.SharedCPUs)
	if err1 != nil || err2 != nil {
		return st.CPUs
	}
	return excl.Union(shared).String()
}

// withSharedNote says a container's shared part in a log line.
func withSharedNote(st state.ContainerState) string {
	if !st.WithShared {
		return ""
	}
	return " plus the shared pool's " + st.SharedCPUs
}

// rememberedShared reads a remembered shared part; Restore replaces it by
// the pool as it is now, so CPUs this node lacks are merely dropped.
func (p *Plugin) rememberedShared(st state.ContainerState) cpuset.CPUSet {
	if !st.WithShared {
		return cpuset.New()
	}
	set, _ := p.nodeCPUs(st.SharedCPUs, "state of container "+rememberedRef(st)+", sharedCPUs")
	return set
}
