package cli

// The boxes of the node map: online cores grouped by socket, NUMA node and
// L3 group, nested in the order in which these contain each other on this
// node. Usually a socket holds NUMA nodes that hold L3 groups, but not
// always: with Intel SNC one L3 spans two NUMA nodes, and a BIOS that
// interleaves memory shows one NUMA node for two sockets. So the order is
// chosen per node, the one that splits fewest groups across boxes; a group
// that still is split is titled "(part)". A group alone in its parent has
// the parent's CPUs and is drawn as one box with both names.

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// mapLevel is one level of the kernel's CPU topology.
type mapLevel struct {
	name string
	of   func(sysfs.CPU) int
}

var mapLevels = [3]mapLevel{
	{"socket", func(c sysfs.CPU) int { return c.Socket }},
	{"NUMA", func(c sysfs.CPU) int { return c.NUMA }},
	{"L3", func(c sysfs.CPU) int { return c.L3 }},
}

// levelOrders are the nestings to choose from, the usual one first: it
// wins ties.
var levelOrders = [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}

// mapGroup is a box of the map, or the whole node at the root.
type mapGroup struct {
	level, key int // which group this is, before merging lone children
	title      string
	children   []*mapGroup
	// cores are a leaf's cores, each its online threads ascending, in
	// order of their first thread.
	cores [][]int
	// perRow is how many of a leaf's cores a row holds; width is the
	// outer width of the root's boxes. Both are set by fit.
	perRow int
	width  int
}

func (g *mapGroup) leaf() bool { return len(g.children) == 0 }

// mapCore is an online core: its threads and where it sits.
type mapCore struct {
	threads []int
	keys    [3]int // by mapLevels
}

// groupNode groups the node's online cores into boxes.
func groupNode(topo *sysfs.Topology) *mapGroup {
	cores := onlineCores(topo)
	order := levelOrders[0]
	best := -1
	for _, o := range levelOrders {
		if s := splits(cores, o); best < 0 || s < best {
			order, best = o, s
		}
	}
	root := &mapGroup{level: -1}
	seen := map[[2]int]int{} // (level, key) → boxes it appears in
	for _, c := range cores {
		g := root
		for _, lv := range order {
			g = g.child(lv, c.keys[lv], seen)
		}
		g.cores = append(g.cores, c.threads)
	}
	root.finish(seen)
	return root
}

// onlineCores lists the online cores in order of their first thread.
func onlineCores(topo *sysfs.Topology) []mapCore {
	byCore := map[int]*mapCore{}
	var cores []*mapCore
	for _, c := range topo.CPUs { // sorted by id
		if !c.Online {
			continue
		}
		mc, ok := byCore[c.Core]
		if !ok {
			mc = &mapCore{}
			for i, lv := range mapLevels {
				mc.keys[i] = lv.of(c)
			}
			byCore[c.Core] = mc
			cores = append(cores, mc)
		}
		mc.threads = append(mc.threads, c.ID)
	}
	out := make([]mapCore, len(cores))
	for i, c := range cores {
		out[i] = *c
	}
	return out
}

// splits counts how often a group would appear in more than one box if
// the levels nested in this order.
func splits(cores []mapCore, order [3]int) int {
	n := 0
	for depth := 1; depth < len(order); depth++ {
		parents := map[int]map[[2]int]bool{}
		for _, c := range cores {
			path := [2]int{-2, -2}
			for i := range depth {
				path[i] = c.keys[order[i]]
			}
			k := c.keys[order[depth]]
			if parents[k] == nil {
				parents[k] = map[[2]int]bool{}
			}
			parents[k][path] = true
		}
		for _, p := range parents {
			n += len(p) - 1
		}
	}
	return n
}

// child returns g's child group for this level and key, adding it.
func (g *mapGroup) child(level, key int, seen map[[2]int]int) *mapGroup {
	for _, c := range g.children {
		if c.key == key {
			return c
		}
	}
	c := &mapGroup{level: level, key: key}
	g.children = append(g.children, c)
	seen[[2]int{level, key}]++
	return c
}

// finish sorts the children by key, titles the groups and merges each
// lone child into its parent (the root keeps its children: they are the
// boxes).
func (g *mapGroup) finish(seen map[[2]int]int) {
	slices.SortFunc(g.children, func(a, b *mapGroup) int { return cmp.Compare(a.key, b.key) })
	for _, c := range g.children {
		c.title = groupTitle(c.level, c.key, seen[[2]int{c.level, c.key}] > 1)
		c.finish(seen)
	}
	if g.level < 0 {
		return
	}
	for len(g.children) == 1 {
		only := g.children[0]
		g.title += ", " + only.title
		g.children, g.cores = only.children, only.cores
	}
}

func groupTitle(level, key int, split bool) string {
	t := mapLevels[level].name + " " + fmt.Sprint(key)
	if key == sysfs.Unknown {
		t = mapLevels[level].name + " unknown"
	}
	if split {
		t += " (part)"
	}
	return t
}

// walkCores calls f for each core in map order.
func (g *mapGroup) walkCores(f func(threads []int)) {
	for _, c := range g.cores {
		f(c)
	}
	for _, c := range g.children {
		c.walkCores(f)
	}
}

// walkCPUs calls f for each CPU in map order: core by core.
func (g *mapGroup) walkCPUs(f func(id int)) {
	g.walkCores(func(threads []int) {
		for _, id := range threads {
			f(id)
		}
	})
}

// fit decides how many cores each row holds so that the map fits width
// columns, and how wide the boxes are: as wide as the widest content, all
// boxes of one depth alike. Rows are balanced: 20 cores at most 8 a row
// make 3 rows of 7, 7 and 6 rather than 8, 8 and 4.
//
// Boxes nest at most twice: a box holds boxes, or rows under a header, or
// rows. Each box takes 4 columns ("| " and " |"), a header's rows 2 more.
func (g *mapGroup) fit(width, coreW, gap int) {
	need := 0
	var visit func(b *mapGroup, boxes int)
	visit = func(b *mapGroup, boxes int) {
		need = max(need, len(b.title)+6+4*(boxes-1))
		if b.leaf() {
			need = max(need, fitRows(b, width-4*boxes, coreW, gap)+4*boxes)
			return
		}
		for _, c := range b.children {
			if c.leaf() { // a header and its rows, indented
				need = max(need, len(c.title)+4*boxes, fitRows(c, width-4*boxes-2, coreW, gap)+2+4*boxes)
			} else {
				visit(c, boxes+1)
			}
		}
	}
	for _, c := range g.children {
		visit(c, 1)
	}
	g.width = need
}

// fitRows sets a leaf's cores per row for the room it has and returns
// the width of its widest row.
func fitRows(leaf *mapGroup, room, coreW, gap int) int {
	most := max(1, (room+gap)/(coreW+gap))
	rows := (len(leaf.cores) + most - 1) / most
	leaf.perRow = (len(leaf.cores) + rows - 1) / rows
	return leaf.perRow*coreW + (leaf.perRow-1)*gap
}
