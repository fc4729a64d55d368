package plugin

// A CPU the hypervisor hot-removed (a vCPU unplug: gone from the kernel's
// present mask, not only offline). The running daemon carries on with it
// as an offline CPU of its pool, and so do a reload of the same file, the
// next restart and validate: the place it had while present is
// remembered (remembered.go) and put back (sysfs.Topology.WithRemembered),
// so the counts are carved on the node as the config was written for it
// and no CPU that stayed changes pools. That is said once, when the CPU
// leaves; the restart and each reload say it again (the layout's
// "configured but not present"). A CPU removed before it was ever seen
// present by this release has no remembered place: it leaves its pool,
// and a list naming it is an error at the next restart, as before.

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// warnRemoved says which CPUs left the present mask, and whether their
// place was remembered. layout is the layout in force before the hotplug.
// Called under the lock.
func (p *Plugin) warnRemoved(before, topo *sysfs.Topology, layout *allocator.Layout) {
	kernelPresent := func(t *sysfs.Topology) cpuset.CPUSet { return t.Present.Difference(t.Absent) }
	removed := kernelPresent(before).Difference(kernelPresent(topo))
	if removed.IsEmpty() {
		return
	}
	kept := removed.Intersection(topo.Absent)
	if !kept.IsEmpty() {
		n := kept.Size()
		p.log.Warnf("hotplug: %s %s removed from the node (no longer present): %s in %s pools as offline %s (%s), at the place remembered while present, and a reload of the same config or the next restart lays the pools out the same; %s them when the hypervisor adds %s back",
			plural.CPUs(kept), plural.Verb(n, "was", "were"), plural.Verb(n, "it stays", "they stay"), plural.Verb(n, "its", "their"), plural.Verb(n, "CPU", "CPUs"),
			poolsOf(layout, kept), plural.Verb(n, "it rejoins", "they rejoin"), plural.Verb(n, "it", "them"))
	}
	if lost := removed.Difference(topo.Absent); !lost.IsEmpty() {
		n := lost.Size()
		p.log.Errorf("hotplug: %s %s removed from the node (no longer present) without a remembered place (%s): the pools run on without %s, but a config that lists %s is refused at the next restart; bring %s back, or remove %s from the config's lists and reload",
			plural.CPUs(lost), plural.Verb(n, "was", "were"), sysfs.RememberedPath(p.cfg.StateFile), plural.Verb(n, "it", "them"), plural.Verb(n, "it", "them"),
			plural.Verb(n, "it", "them"), plural.Verb(n, "it", "them"))
	}
}

// poolsOf names the pool each CPU was carved in ("15 exclusive").
func poolsOf(l *allocator.Layout, cpus cpuset.CPUSet) string {
	out := ""
	for i, cpu := range cpus.List() {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%d %s", cpu, layoutPoolOf(l, cpu))
	}
	return out
}
