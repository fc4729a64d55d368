package numamem

import "slices"

// Resized is what a running container holds once its memory limit is
// limit (in bytes; 0 asks for none) in place of the one its holdings add
// up to; its hugepages stay as they are (they cannot be resized in place).
// order is the nodes its memory may be on, its CPUs' nodes first; lent is
// what it may have of the nodes beyond what the account leaves free (its
// claims' reservations: LendClaims).
//
// A growth is taken from the nodes of order, each up to what it has free;
// what they cannot hold is counted on the last of them anyway, and short
// says what each had (Shortage): a limit is a ceiling the kernel does not
// set aside. A shrink gives back from the last of them first; a node
// outside order (a record from before its mems changed) before any.
func (m *Account) Resized(held []NodeMemory, order []int, limit int64, lent Lent) (out []NodeMemory, short string) {
	had := DemandOf(held).Memory
	out = cloneHoldings(held)
	if limit > had {
		fit := m.Fit(new(Fit), Demand{Memory: limit - had}, lent, nil, true)
		if !fit.FitsMemory(order) {
			short, _ = fit.Shortage(order)
		}
		for _, nm := range fit.Split(order) {
			out = addHolding(out, nm.Node, nm.Memory)
		}
	} else {
		give := had - limit
		back := slices.Clone(order)
		slices.Reverse(back)
		for _, nm := range out {
			if !slices.Contains(order, nm.Node) {
				back = append([]int{nm.Node}, back...)
			}
		}
		for _, n := range back {
			for i := range out {
				if out[i].Node == n && give > 0 {
					take := min(give, out[i].Memory)
					out[i].Memory -= take
					give -= take
				}
			}
		}
	}
	out = slices.DeleteFunc(out, func(nm NodeMemory) bool { return nm.Memory == 0 && len(nm.HugePages) == 0 })
	if len(out) == 0 {
		out = nil
	}
	return out, short
}

// cloneHoldings copies holdings deep enough to change their memory.
func cloneHoldings(held []NodeMemory) []NodeMemory {
	out := slices.Clone(held)
	for i := range out {
		out[i].HugePages = slices.Clone(out[i].HugePages)
	}
	return out
}

// addHolding adds memory to a node's holding, in node order.
func addHolding(held []NodeMemory, node int, memory int64) []NodeMemory {
	if memory == 0 {
		return held
	}
	for i := range held {
		if held[i].Node == node {
			held[i].Memory += memory
			return held
		}
	}
	held = append(held, NodeMemory{Node: node, Memory: memory})
	slices.SortFunc(held, func(x, y NodeMemory) int { return x.Node - y.Node })
	return held
}
