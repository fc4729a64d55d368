package allocator

// The figures placement weighs (mode, nodeCap, plan, candidate, coreState,
// tally, group): plain values at the bottom of the placement files, so that
// the working memory (scratch.go), the planner (planner.go), the cores and
// threads (take.go), the node combinations (plan.go) and the steps
// (placement.go) each use only what lies below them.

import (
	"k8s.io/utils/cpuset"
)

// mode is the unit an exclusive request is counted and taken in.
type mode int

// nodeCap is a node's room for a request: cap units in all, and its
// cores tallied by what they give.
type nodeCap struct {
	v   *nodeView
	cap int
	t   tally
}

// plan is a candidate placement with the figures it is judged by.
type plan struct {
	// picked and reservedIDs are the CPUs taken; cpus and reserved are
	// set from them for the chosen plan only.
	picked, reservedIDs []int
	cpus, reserved      cpuset.CPUSet
	nodes               []int
	homeMisses          int // nodes a growing container does not use yet
	hintMisses          int
	sockets             int
	distance            int
	cores               int // physical cores touched
	wholeCores          int // entirely free cores taken from, fully or in part
	l3Groups            int
	leftover            int
}

// candidate is a combination of nodes that has room for the request, with
// the bound of any plan built on it. Its nodes share the request as the
// cores they offer decide (amounts is nil), or, when distributing, each
// takes its amount.
type candidate struct {
	combo   []nodeCap
	need    int
	amounts []int
	bound   plan
}

// coreState is a core's free threads at decision time.
type coreState struct {
	core *coreView
	free []int // the core's threads in the pool that nobody holds
	// whole is true when the core is the taker's alone if it takes every
	// free thread: each online thread of the core is in the pool and free.
	// A sibling held by another container or belonging to another pool
	// makes the core partly used; an offline sibling runs nothing and does
	// not count.
	whole bool
	// mine is true when a growing container already runs on another
	// thread of the core: taking it completes the container's core.
	mine bool
}

// tally counts cores by what they give: part[f] partly used cores with f
// free threads (their other threads belong to someone else), whole[f]
// entirely free cores of f threads. In the whole-core modes every core
// that gives a unit is counted as a whole core of one unit.
type tally struct{ part, whole []int }

// group is an L3 group of the nodes a plan uses: its cores' states, their
// tally and room, its socket, and whether a growing container runs in it.
type group struct {
	states []coreState
	t      tally
	cap    int
	socket int
	mine   bool
}

const (
	// modeThreads takes logical CPUs, whole cores first.
	modeThreads mode = iota
	// modeFullCores takes only complete, entirely free cores.
	modeFullCores
	// modeHideSiblings takes one thread of each entirely free core and
	// keeps its siblings idle.
	modeHideSiblings
)
