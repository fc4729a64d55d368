package cli

// The node map's layout (see nodemap.go): what each cell says (pool,
// owner, marks), the owners' labels in reading order, and the widths of
// cells and cores that decide how many cores a row of each box holds. It
// decides where things are; mapdraw.go decides how they look.

import (
	"strconv"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// cell is what the map says about one online CPU.
type cell struct {
	pool  string
	owner int // the owner whose label the cell shows; -1 for none
	users int // how many owners run there
	held  bool
	marks []bool // by column
}

// drawing is one nodeMap being drawn.
type drawing struct {
	m      nodeMap
	look   mapLook
	g      glyphs
	online cpuset.CPUSet
	cells  map[int]*cell
	// markCols are the marks that take a column: those some cell has.
	markCols []mark
	labels   map[int]string // by owner index, in order of first appearance
	order    []int          // owner indexes by label
	labelW   int
	idW      int // digits of the highest CPU id
	cellW    int
	threads  int // the most threads of a core, and so of a bracket
	tree     *mapGroup
}

// fillCells works out each online CPU's pool, owner and marks.
func (d *drawing) fillCells() {
	d.cells = map[int]*cell{}
	for _, id := range d.online.UnsortedList() {
		d.cells[id] = &cell{owner: -1}
	}
	for i := range d.m.owners {
		o := &d.m.owners[i]
		for _, id := range o.cpus.UnsortedList() {
			c, ok := d.cells[id]
			if !ok {
				continue
			}
			c.users++
			switch {
			case o.exclusive() && (c.owner < 0 || !d.m.owners[c.owner].exclusive()):
				c.owner, c.held, c.pool = i, o.held, o.pool
			case c.owner < 0:
				c.owner = i
			}
		}
	}
	for _, c := range d.cells {
		if c.owner >= 0 && !d.m.owners[c.owner].exclusive() && c.users > 1 {
			c.owner = -1 // several share it: "+"
		}
	}
	for id, c := range d.cells {
		if c.pool == "" {
			c.pool = d.poolOf(id)
		}
	}
	for _, mc := range d.m.marks {
		if mc.cpus.Intersection(d.online).IsEmpty() {
			continue
		}
		d.markCols = append(d.markCols, mc.mark)
		for id, c := range d.cells {
			c.marks = append(c.marks, mc.cpus.Contains(id))
		}
	}
}

// poolOf is the pool a CPU is in: the first pool listing it, in the order
// of pools.Names (a free exclusive-non-isolcpus CPU runs infra), else the
// pool of a container running there.
func (d *drawing) poolOf(id int) string {
	for _, p := range pools.Names() {
		if d.m.pools[p].Contains(id) {
			return p
		}
	}
	for _, o := range d.m.owners {
		if o.cpus.Contains(id) {
			return o.pool
		}
	}
	return ""
}

// assignLabels labels the owners in the order the map shows them, so
// that A comes first when reading it top to bottom.
func (d *drawing) assignLabels() {
	seen := map[int]bool{}
	d.tree.walkCPUs(func(id int) {
		if o := d.cells[id].owner; o >= 0 && !seen[o] {
			seen[o] = true
			d.order = append(d.order, o)
		}
	})
	d.labelW = 1
	for n := 26; n < len(d.order); n *= 26 {
		d.labelW++
	}
	for i, o := range d.order {
		d.labels[o] = label(i, d.labelW)
	}
}

// label is the i-th label of the given width: A..Z, or AA, AB, ... ZZ.
func label(i, width int) string {
	b := make([]byte, width)
	for k := width - 1; k >= 0; k-- {
		b[k] = byte('A' + i%26)
		i /= 26
	}
	return string(b)
}

// measure sizes the cells and the boxes and decides how many cores each
// row of each group holds.
func (d *drawing) measure() {
	maxID := 0
	for _, id := range d.online.UnsortedList() {
		maxID = max(maxID, id)
	}
	d.idW = len(strconv.Itoa(maxID))
	d.cellW = d.idW + len(d.markCols)
	if d.m.pools != nil || d.m.showOwners {
		d.cellW += 2 // " " and the pool letter
	}
	if d.m.showOwners {
		d.cellW += d.labelW
	}
	d.tree.walkCores(func(threads []int) { d.threads = max(d.threads, len(threads)) })
	d.tree.fit(d.look.width, d.coreWidth(), d.gap())
}

// coreWidth is the width of a core: its cells, between brackets when the
// node has SMT.
func (d *drawing) coreWidth() int {
	if d.threads <= 1 {
		return d.cellW
	}
	return 2 + d.threads*d.cellW + d.threads - 1
}

// gap separates cores in a row; cells without brackets need more air.
func (d *drawing) gap() int {
	if d.threads <= 1 {
		return 2
	}
	return 1
}
