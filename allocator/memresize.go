package allocator

// An in-place resize of a running container's memory limit (Kubernetes'
// resize of memory, an UpdateContainer with a new memory.limit): the
// per-node account follows the new limit, so that the next decision, the
// status, the metrics, the DRA offer and the state file see what the
// runtime now enforces (docs/pools.md, "In-place resize").

import (
	"fmt"
	"slices"

	"github.com/cpupool/nri-cpupool/numamem"
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
	had := numamem.DemandOf(c.Memory).Memory
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
	// A resize reuses no hold's memory (lentMemory), only what its claims
	// reserve and it does not hold yet (LendClaims).
	held, short := a.mem.Resized(c.Memory, order, limit, a.mem.LendClaims(nil, c.Pod.UID, c.Container))
	var warning string
	if short != "" {
		warning = fmt.Sprintf("container %s: memory limit resized from %s to %s: %s; counted on its NUMA nodes %s anyway (a running container's memory never moves), so it may be OOM-killed before its limit: lower the limit or memory.reservedPerNode",
			c.Pod.ContainerName(c.Container), numamem.Bytes(had), numamem.Bytes(limit), short, nodes)
	}
	c.Memory = held
	a.mem.Set(c.ID, held)
	return Result{Assignment: *c, Warning: warning}, true, nil
}
