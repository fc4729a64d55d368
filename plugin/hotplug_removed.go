package plugin

// A CPU the hypervisor hot-removed (a vCPU unplug: gone from the kernel's
// present mask, not only offline). The running daemon carries on without
// it: its pools only lose it (allocator.HotplugLayout). But the config in
// force was written for the node as it was: a list that names the CPU is
// an error on the node as it is now ("CPU 15 does not exist"), a count
// may no longer fit, and a count that fits is carved on the smaller node,
// which can give other CPUs other pools than the running daemon's. A
// reload of the same file, and the next restart, see the node as it is:
// the restart refuses to start (nothing is pinned then) or lays the pools
// out differently. Laying out a restart as if the removed CPUs were still
// there needs their place in the topology, which the kernel no longer
// shows; that is not done (docs/limitations.md). So the operator is told
// at once, while the daemon still runs, not at the next restart.

import (
	"fmt"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// warnRemoved says, when CPUs left the present mask, whether the config in
// force still fits the node as it is now, as a reload or a restart would
// lay it out, and what to do if not. running is the layout in force after
// the hotplug. Called under the lock; a hot-remove is rare, and the layout
// is built only then.
func (p *Plugin) warnRemoved(before, topo *sysfs.Topology, running *allocator.Layout) {
	removed := before.Present.Difference(topo.Present)
	if removed.IsEmpty() {
		return
	}
	what := fmt.Sprintf("hotplug: %s %s removed from the node (no longer present); the pools run on without %s", plural.CPUs(removed),
		plural.Verb(removed.Size(), "was", "were"), plural.Verb(removed.Size(), "it", "them"))
	fix := fmt.Sprintf("before the next restart, bring %s back, or edit the config to the node as it is now: remove CPUs %s from its lists and give the pools by the CPUs they run on now (%s) instead of by count, and reload (see Limitations in the docs)",
		plural.Verb(removed.Size(), "it", "them"), removed, poolsByCPUs(running))
	restart, problems := allocator.BuildLayoutRunning(topo, p.cfg)
	switch {
	case problems.HasErrors():
		p.log.Errorf("%s, but the config in force no longer fits the node: a reload of the same file is invalid and the next restart refuses to start, so nothing is pinned then (%v); %s",
			what, joinProblems(problems.Errors()), fix)
	case layoutMoved(restart, running):
		p.log.Errorf("%s, but a reload of the same file or the next restart carves the config's counts on the smaller node and lays the pools out differently (%s instead of %s): a reload is refused if that moves a container, and a restart keeps exclusive containers where they run although their CPUs then belong to another pool; %s",
			what, poolsByCPUs(restart), poolsByCPUs(running), fix)
	}
}

// poolsByCPUs names the exclusive and shared pools' CPUs of a layout, as
// pools.*.cpus would give them.
func poolsByCPUs(l *allocator.Layout) string {
	name := func(set cpuset.CPUSet) string {
		if set.IsEmpty() {
			return "none"
		}
		return set.String()
	}
	return fmt.Sprintf("%s %s, %s %s", pools.Exclusive, name(l.Exclusive), pools.Shared, name(l.Shared))
}

// joinProblems lists problems on one line: "key: message; key: message".
func joinProblems(ps config.Problems) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Key + ": " + p.Message
	}
	return strings.Join(out, "; ")
}
