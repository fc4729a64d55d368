package allocator

import (
	"slices"
)

// scratch is the working memory of takeFromNode and its passes, kept by
// the allocator between decisions: a decision visits every core of each
// node it weighs, and allocating for each visit was half its time. Each
// takeFromNode starts over; what it returns is copied out.
type scratch struct {
	states  []coreState // by position in the node, then in the walk order
	threads []int       // the free threads of partly free cores
	used    []bool      // threadTaker: cores already taken from
	partial []int       // threadTaker: partly used cores
	whole   []int       // threadTaker: whole free cores
	groups  []int       // takeFromNode: per L3 group figures and order
	mine    []bool
	// The planner's own small slices (a node's room, a combination, its
	// shares and outline), carved out one after the other for one
	// decision: reset by newPlanner.
	arena  []int
	flags  []bool
	combos []nodeCap
	cands  []candidate
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
