package allocator

// Memory follows the CPUs (docs/placement.md, "Memory follows the CPUs"):
// the hugepages and memory limits of the containers whose memory the
// allocator pins are counted per NUMA node by the numamem package, and an
// exclusive container's CPUs go where its memory fits. This file is the
// allocator's side of it: which requests are counted, which holds and
// claims a request may reuse, and which nodes serve a set of CPUs. The
// account itself, its fit, split and refusal are numamem's.

import (
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// MemoryUse returns what the counted containers and holds hold, by node in
// id order; nodes nobody holds anything of are left out.
func (a *Allocator) MemoryUse() []numamem.NodeMemoryUse { return a.mem.Use() }

// MemoryReport reports every NUMA node with memory, in id order, from the
// counts last read: it reads no file.
func (a *Allocator) MemoryReport() []numamem.NodeMemoryReport { return a.mem.Report() }

// countsMemory tells whether the allocator counts a request's memory: an
// exclusive container whose mems it pins, asking for some.
func (a *Allocator) countsMemory(req Request) bool {
	return a.pinMemory && pools.IsExclusive(req.Pool) && req.grow == nil && !req.Demand.IsZero()
}

// memoryFit works out the request's memory on every node (numamem's
// Account.Fit), with what the holds and claims it may reuse hold lent to
// it. now, when not nil, are the hugepage counts read for this decision.
//
// The fit is the allocator's own, reused by the next decision. For a
// container that runs already (req.running) free_hugepages is no floor,
// as in runningFit: every path that decides a running container's memory
// uses the same rule.
func (a *Allocator) memoryFit(req Request, now map[int][]sysfs.HugePages) *numamem.Fit {
	return a.fitFor(&a.fitBuf, req, now, req.running)
}

// runningFit is memoryFit for a container that runs already: the pages it
// touched are not free any more, but they are its own.
func (a *Allocator) runningFit(req Request) *numamem.Fit {
	return a.fitFor(new(numamem.Fit), req, nil, true)
}

func (a *Allocator) fitFor(f *numamem.Fit, req Request, now map[int][]sysfs.HugePages, running bool) *numamem.Fit {
	lent := a.mem.LendClaims(a.lentMemory(req), req.Pod.UID, req.Container)
	return a.mem.Fit(f, req.Demand, lent, now, running)
}

// lentMemory is what the holds a request may reuse hold, by node: its own
// last run's (a new run ends it) and those of its pod's containers that
// completed, as their CPUs are (see reusableFor).
//
// A resize (req.grow) reuses no hold's memory: its growth takes CPUs of
// holds without their memory (takeFromHolds), and a hold's memory is only
// given to a new container that takes it.
func (a *Allocator) lentMemory(req Request) numamem.Lent {
	var out numamem.Lent // nil, which reads as nothing lent, for most
	if req.Pod.UID == "" || req.grow != nil {
		return out
	}
	for _, key := range a.podHoldKeys(req.Pod.UID) {
		h := a.holds[key]
		if h.Container != req.Container && !h.Reusable() {
			continue
		}
		out = a.mem.LendHeld(out, h.ID)
	}
	return out
}

// memNodesOf returns the nodes whose memory serves the NUMA nodes given (a
// memory-less node's nearest node with memory), in id order.
func (a *Allocator) memNodesOf(nodes []int) []int {
	return a.memNodesInto(nil, nodes)
}

// memNodesInto is memNodesOf appended to out[:0], for callers with a
// buffer of their own (the planner's scratch: it is asked once per
// combination weighed).
func (a *Allocator) memNodesInto(out, nodes []int) []int {
	out = out[:0]
	for _, n := range nodes {
		pos, ok := a.x.nodePos[n]
		if !ok {
			continue
		}
		if m := a.x.memNode[pos]; m != sysfs.Unknown && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// splitOrder orders the memory nodes a placement may take memory from: the
// nodes of its CPUs first, then the other nodes of its plan, in id order.
// The order is built in the allocator's scratch, valid until the next
// decision: Split copies what it keeps.
func (a *Allocator) splitOrder(cpus cpuset.CPUSet, planNodes []int) []int {
	sc := &a.scratch
	local := a.memNodesInto(sc.memOrder, a.x.numaNodes(cpus))
	sc.memPlan = a.memNodesInto(sc.memPlan, planNodes)
	for _, n := range sc.memPlan {
		if !slices.Contains(local, n) {
			local = append(local, n)
		}
	}
	sc.memOrder = local
	return local
}
