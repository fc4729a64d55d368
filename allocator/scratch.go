package allocator

import (
	"slices"
)

// scratch is the working memory of a decision's takes, kept by the
// allocator between decisions: a decision visits every core of each node
// it weighs, and allocating for each visit was half its time. Each take
// starts over; what it returns is copied out.
type scratch struct {
	states  []coreState // the cores of the groups taken from, group by group
	threads []int       // the free threads of partly free cores
	groups  []group     // the L3 groups taken from
	sub     []group     // those of some sockets only
	whole   []int       // takeCores: entirely free cores, by group and position
	partial []int       // takeCores: partly used cores
	amounts []int       // takeCores: what each chosen core gives
	// The planner's own small slices (a node's room, a combination, its
	// shares and outline, tallies), carved out one after the other for
	// one decision: reset by newPlanner.
	arena  []int
	flags  []bool
	combos []nodeCap
	cands  []candidate
	// The memory nodes a placement's memory is split over (splitOrder):
	// those of its CPUs, then those of its plan.
	memOrder, memPlan []int
}

// carve returns n zero values from the end of arena, which it grows: a
// slice of its own (capped, so that appending to it never reaches the
// next), valid until the arena is reset even if the arena moves.
func carve[T any](arena *[]T, n int) []T {
	start := len(*arena)
	*arena = slices.Grow(*arena, n)[:start+n]
	out := (*arena)[start : start+n : start+n]
	clear(out)
	return out
}

// ints returns n zeroed ints from the decision's arena.
func (sc *scratch) ints(n int) []int { return carve(&sc.arena, n) }

// bools returns n false bools from the decision's arena.
func (sc *scratch) bools(n int) []bool { return carve(&sc.flags, n) }

// nodeCaps returns room for n nodes from the decision's arena.
func (sc *scratch) nodeCaps(n int) []nodeCap { return carve(&sc.combos, n)[:0] }

// groupsIn returns the groups of gs whose socket is one of sockets[idx].
func (sc *scratch) groupsIn(gs []group, sockets, idx []int) []group {
	sc.sub = sc.sub[:0]
	for _, g := range gs {
		for _, i := range idx {
			if g.socket == sockets[i] {
				sc.sub = append(sc.sub, g)
			}
		}
	}
	return sc.sub
}
