package cli

// The node map of `status --map` and `topology --map`: the node as the
// kernel sees it, sockets, NUMA nodes and L3 groups as nested boxes (see
// maptree.go), and in them each core with its thread siblings between
// brackets, one cell per CPU:
//
//	[ 4 eA^  12 eA^]
//	   | ||`-- marks, one column each: ^ isolated by the kernel, * held, ...
//	   | |`--- owner: a label from the legend, . free, + several containers
//	   | `---- pool: e exclusive, s shared, i infra, n exclusive-non-isolcpus
//	   `------ CPU id
//
// drawNodeMap is pure: the commands read the node and the state file and
// hand it a nodeMap, the tests hand it fixtures. Colour and box-drawing
// characters change how cells look, never where they are, so the plain
// text is the same with and without colour.
//
// This file is what the map is handed (nodeMap, its owners and marks) and
// drawNodeMap, which lays it out (maplayout.go: where things are) and then
// draws it (mapdraw.go: how they look).

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// nodeMap is what the map draws.
type nodeMap struct {
	topo *sysfs.Topology
	// pools are the pools' CPUs; nil when no layout is known (topology
	// without --config), and the cells then have no pool column.
	pools map[string]cpuset.CPUSet
	// owners are the containers and the stopped containers' holds, in the
	// order the legend lists those that are not drawn.
	owners []mapOwner
	// showOwners gives the cells an owner column; false where nothing runs
	// yet (topology).
	showOwners bool
	// marks are facts about CPUs, each drawn in a column of its own in
	// every cell, in this order. Only marks some online CPU has take room.
	marks []markedCPUs
}

// mapOwner is a container, or CPUs held for a stopped one.
type mapOwner struct {
	name string // namespace/pod/container
	pool string
	// cpus are every CPU it keeps from others, idle siblings included.
	cpus cpuset.CPUSet
	held bool
	// note says more beside the pool in the legend: a held one's exit code.
	note string
}

// exclusive tells whether the owner's CPUs are its own: nobody else runs
// there, so its cells carry its label.
func (o *mapOwner) exclusive() bool { return o.held || pools.IsExclusive(o.pool) }

// mark is a fact about a CPU, drawn as one character after the owner and
// explained in the key. A new fact is a mark and one markedCPUs entry where
// the command builds its map (see nodeMarks).
type mark struct {
	glyph string
	means string
}

var (
	markIsolated = mark{"^", "isolated by the kernel"}
	markHeld     = mark{"*", "held for a stopped container"}
	markIdle     = mark{"_", "kept idle for its core's owner"}
	// The plugin's isolation of a container's CPUs (docs/tuning.md "IRQ isolation",
	// "Isolated partitions"), as its state file records it.
	markIRQsOff   = mark{"~", "device IRQs kept off"}
	markPartition = mark{"#", "isolated cpuset partition"}
)

// markedCPUs are the CPUs that have a mark.
type markedCPUs struct {
	mark
	cpus cpuset.CPUSet
}

// nodeMarks are the marks of the node itself, which both maps draw. The
// marks of what the plugin does to a container's CPUs (held, idle
// siblings, IRQs kept off, a partition) come from the state file
// (stateMap).
func nodeMarks(topo *sysfs.Topology) []markedCPUs {
	return []markedCPUs{
		{markIsolated, topo.Isolated},
	}
}

// drawNodeMap draws the map: a summary line, the boxes, the key and the
// legend of owner labels.
func drawNodeMap(m nodeMap, look mapLook) []string {
	d := &drawing{m: m, look: look, g: look.glyphs(), online: m.topo.Online, labels: map[int]string{}}
	d.tree = groupNode(m.topo)
	d.fillCells()
	d.assignLabels()
	d.measure()
	var lines []mapLine
	lines = append(lines, d.summary()...)
	lines = append(lines, d.boxes()...)
	lines = append(lines, d.key()...)
	lines = append(lines, d.legend()...)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.render(look.color)
	}
	return out
}

// what is the owner's pool in the legend, and whether it is held.
func (o *mapOwner) what() string {
	s := o.pool
	if o.held {
		s += ", held"
	}
	if o.note != "" {
		s += " (" + o.note + ")"
	}
	return s
}
