package plugin

// Mems the plugin did not write (docs/placement.md, "Memory follows the
// CPUs", and its interplay with the kubelet's Memory Manager): the
// kubelet's Memory Manager with its Static policy, or anything else that
// sets a container's cpuset.mems, disagrees with the nodes the plugin
// counted the container's memory on. The plugin says so, once per
// container and event kind, naming what to change; it does not fight.

import (
	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// The event label of cpupool_foreign_mems_total.
const (
	foreignAtCreate      = "create"
	foreignAtSynchronize = "synchronize"
	foreignAtUpdate      = "update"
)

// noteForeignMems warns that a container runs, or is asked to run, with
// mems the plugin did not write, and counts it. wrote is empty when the
// plugin has no record of mems for it.
func (p *Plugin) noteForeignMems(event, who string, wrote cpuset.CPUSet, shows string) {
	p.metrics.countForeignMems(event)
	ours := wrote.String()
	if wrote.IsEmpty() {
		ours = "none"
	}
	switch event {
	case foreignAtCreate:
		p.log.Warnf("container %s: its spec sets mems %s (the kubelet's Memory Manager?); the plugin pins mems %s instead, where it counts the container's memory: set the kubelet's memoryManagerPolicy to None",
			who, shows, ours)
	case foreignAtUpdate:
		p.log.Warnf("container %s: keeping mems %s, which the plugin wrote, instead of the requested %s; another memory policy (the kubelet's Memory Manager?) sets mems: set the kubelet's memoryManagerPolicy to None",
			who, ours, shows)
	default:
		p.log.Warnf("synchronize: container %s runs with mems %s, the plugin wrote %s; its memory is counted on the nodes it runs with, which it keeps; another memory policy (the kubelet's Memory Manager?) set them: set the kubelet's memoryManagerPolicy to None",
			who, shows, ours)
	}
}

// foreignMemsAsked tells whether an update asks a container whose mems the
// plugin pins for other mems: the Memory Manager's Static policy writes
// its own at each update. The answer keeps ours; the warning and the count
// are once per container (a string compare otherwise: the reply path).
func (p *Plugin) foreignMemsAsked(pod *api.PodSandbox, ctr *api.Container, a allocator.Assignment, res *api.LinuxResources) bool {
	want := res.GetCpu().GetMems()
	if want == "" || !p.cfg.PinMemory || a.Mems.IsEmpty() {
		return false
	}
	set, err := cpulist.Parse(want)
	if err == nil && set.Equals(a.Mems) {
		return false
	}
	if !p.memsOverrode[a.ID] {
		p.memsOverrode[a.ID] = true
		p.noteForeignMems(foreignAtUpdate, containerRef(pod, ctr), a.Mems, shownMems(want))
	}
	return true
}

// foreignMemsAtCreation warns when a new container's spec sets mems other
// than those the plugin pins it to: the plugin's adjustment replaces them
// (its memory is counted on the plugin's nodes, and a container confined
// elsewhere could lack its hugepages there). Nothing for a spec without
// mems, the usual case: one string read.
func (p *Plugin) foreignMemsAtCreation(who string, ctr *api.Container, a allocator.Assignment) {
	want := ctr.GetLinux().GetResources().GetCpu().GetMems()
	if want == "" || !p.cfg.PinMemory || a.Mems.IsEmpty() {
		return
	}
	if set, err := cpulist.Parse(want); err == nil && set.Equals(a.Mems) {
		return
	}
	p.noteForeignMems(foreignAtCreate, who, a.Mems, shownMems(want))
}

// shownMems writes mems someone else set: as a list when they are one,
// else quoted and bounded (they come from the runtime or a tenant).
func shownMems(s string) string {
	if set, err := cpulist.Parse(s); err == nil {
		return set.String()
	}
	return cpulist.Echo(s)
}
