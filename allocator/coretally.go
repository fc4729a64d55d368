package allocator

// coreTally counts an exclusive pool view's cores by what they give, node
// by node, kept as CPUs are taken and given back (Allocator.setOwner), so
// that a decision weighs a node by reading a few counters instead of
// walking every core of the pool and the owner of every thread (issue 45:
// on a 384-CPU node that walk touched about 11 KiB per creation, which the
// daemon's handler finds evicted from its caches between two creations).
//
// A core is counted in its node under its shape, whether every online
// thread of the core is in the pool (complete) and how many threads the
// pool has of it, and how many of those are free: enough for each mode's
// units (take.go, nodeCapacity), which depend on nothing else.
type coreTally struct {
	// width is one more than the most threads a core of the view has: the
	// number of free counts a shape can have.
	width int
	// coreOf is, by CPU id, the position in cores of the CPU's core, -1 for
	// a CPU outside the view.
	coreOf []int32
	cores  []talliedCore
}

// talliedCore is one core of the view: where its counter is and how many of
// its threads are free.
type talliedCore struct {
	// counts is its node's counters (nodeView.counts); shape is the offset
	// of its shape's row in them.
	counts []int
	shape  int
	free   int
}

// shapeOffset is the offset of a core's shape's row in its node's counters.
func (t *coreTally) shapeOffset(complete bool, threads int) int {
	row := threads
	if complete {
		row += t.width
	}
	return row * t.width
}

// rows is the number of counters of one node: a row of free counts for
// each shape.
func (t *coreTally) rows() int { return 2 * t.width * t.width }

// taken moves cpu's core from one free count to the next: one fewer free
// thread when busy, one more when not. A CPU outside the view changes
// nothing.
func (t *coreTally) taken(cpu int, busy bool) {
	if t == nil || cpu < 0 || cpu >= len(t.coreOf) || t.coreOf[cpu] < 0 {
		return
	}
	c := &t.cores[t.coreOf[cpu]]
	c.counts[c.shape+c.free]--
	if busy {
		c.free--
	} else {
		c.free++
	}
	c.counts[c.shape+c.free]++
}
