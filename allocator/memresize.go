package allocator

// An in-place resize of a running container's memory limit (Kubernetes'
// resize of memory, an UpdateContainer with a new memory.limit): the
// per-node account follows the new limit, so that the next decision, the
// status, the metrics, the DRA offer and the state file see what the
// runtime now enforces (docs/pools.md, "In-place resize").

import (
	"fmt"
	"slices"

	"github.com/cpupool/nri-cpupool/pools"
)

// ResizeMemory counts a running container's new memory limit (in bytes; 0
// asks for none) in place of the one it holds; changed is false when
// nothing changed (its memory is not counted: not exclusive, or memory not
// pinned; or the limit is the one counted). Its hugepages cannot be resized
// in place and stay as they are.
//
// A running container's memory never moves: the new limit is counted on
// the nodes of its mems, which stay as they are (narrowing them would
// migrate its pages, widening them would spread them). A growth is taken
// from those nodes, its CPUs' nodes first, each up to what it has free;
// what they cannot hold is counted on the last of them anyway, with a
// warning, as a limit no set of nodes holds is at a creation: a limit is a
// ceiling the kernel does not set aside, the kubelet admitted it, and the
// node is then full for the next container. A shrink gives back from the
// last of those nodes first. The container's CPUs and mems do not change.
func (a *Allocator) ResizeMemory(id string, limit int64) (Result, bool, error) {
	c, ok := a.containers[id]
	if !ok {
		return Result{}, false, fmt.Errorf("container %s is not known", id)
	}
	limit = max(limit, 0)
	had := DemandOf(c.Memory).Memory
	if !a.pinMemory || !pools.IsExclusive(c.Pool) || had == limit {
		return Result{Assignment: *c}, false, nil
	}
	nodes := a.knownMems(c.Mems)
	if nodes.IsEmpty() {
		nodes = a.memsFor(c.CPUs)
	}
	// Its CPUs' nodes first, but only those of its mems: mems the runtime
	// runs it with (kept at a restart) may leave its CPUs' nodes out, and
	// its memory cannot be there.
	order := slices.DeleteFunc(slices.Clone(a.splitOrder(c.CPUs, nodes.List())), func(n int) bool { return !nodes.Contains(n) })
	held := cloneHoldings(c.Memory)
	var warning string
	if limit > had {
		// A resize reuses no hold's memory (lentMemory), only what its
		// claims reserve and it does not hold yet (lendClaims).
		req := Request{ID: c.ID, Pod: c.Pod, Container: c.Container, Pool: c.Pool, Demand: Demand{Memory: limit - had}, grow: c, running: true}
		fit := a.fitFor(new(memFit), req, nil, true)
		if !fit.fitsMemory(order) {
			msg, _ := fit.shortage(order)
			warning = fmt.Sprintf("container %s: memory limit resized from %s to %s: %s; counted on its NUMA nodes %s anyway (a running container's memory never moves), so it may be OOM-killed before its limit: lower the limit or memory.reservedPerNode",
				c.Pod.ContainerName(c.Container), Bytes(had), Bytes(limit), msg, nodes)
		}
		for _, nm := range fit.split(order) {
			held = addHolding(held, nm.Node, nm.Memory)
		}
	} else {
		// The last nodes of its order first; a node outside it (a record
		// from before its mems changed) before any.
		give := had - limit
		back := slices.Clone(order)
		slices.Reverse(back)
		for _, nm := range held {
			if !slices.Contains(order, nm.Node) {
				back = append([]int{nm.Node}, back...)
			}
		}
		for _, n := range back {
			for i := range held {
				if held[i].Node == n && give > 0 {
					take := min(give, held[i].Memory)
					held[i].Memory -= take
					give -= take
				}
			}
		}
	}
	held = slices.DeleteFunc(held, func(nm NodeMemory) bool { return nm.Memory == 0 && len(nm.HugePages) == 0 })
	if len(held) == 0 {
		held = nil
	}
	c.Memory = held
	a.setMemory(c.ID, held)
	return Result{Assignment: *c, Warning: warning}, true, nil
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
