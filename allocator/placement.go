package allocator

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
)

// CPUsFor converts a CPU request in milli-CPUs to whole exclusive CPUs,
// rounding up so that a request is never shortchanged. Requests beyond any
// node are capped just above cpulist.MaxCPUs, where placement refuses them:
// the rounding must not overflow.
func CPUsFor(milliCPU int64) int {
	if milliCPU <= 0 {
		return 0
	}
	n := milliCPU / 1000
	if milliCPU%1000 != 0 {
		n++
	}
	return int(min(n, cpulist.MaxCPUs+1))
}

// placeExclusive chooses CPUs for an exclusive request, by the rules of
// docs/placement.md:
//
//  1. The unit the request is counted in: CPUs, or whole cores with
//     full-pcpus-only and hide-hyperthreads (which keeps the siblings idle).
//  2. The hold of the container's last run, when it fits as it is.
//  3. The CPUs its pod holds for stopped containers, alone or with the
//     free ones (placeReusing).
//  4. The NUMA nodes: the fewest that have room, the best combination of
//     them by plan.better, found by branch and bound (plan.go, bestPlan).
//  5. Inside them, the fewest sockets, cores, whole cores and L3 groups,
//     and then the threads (take.go, take).
//  6. Infra's minimum, for exclusive-non-isolcpus.
func (a *Allocator) placeExclusive(req Request) (cpuset.CPUSet, cpuset.CPUSet, error) {
	who := "container " + req.Pod.ContainerName(req.Container)
	if req.grow != nil {
		who = fmt.Sprintf("container %s grown from %d to %d CPUs", req.Pod.ContainerName(req.Container),
			req.grow.CPUs.Size(), req.grow.CPUs.Size()+CPUsFor(req.MilliCPU))
	}
	n := CPUsFor(req.MilliCPU)
	if n == 0 {
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s gives whole CPUs by the container's CPU request, but %s requests no CPU; set resources.requests.cpu (e.g. \"2\")", req.Pool, who)
	}
	view := a.views[req.Pool]
	if view.cpus.IsEmpty() {
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s has no CPUs on this node; configure pools.%s", req.Pool, req.Pool)
	}
	// 1. The unit.
	tpc := a.x.threadsPerCore
	m := modeThreads
	need := n
	switch {
	case req.Options.HideHyperthreads && tpc > 1:
		m = modeHideSiblings
	case req.Options.FullPCPUsOnly && tpc > 1:
		if n%tpc != 0 {
			return cpuset.New(), cpuset.New(), fmt.Errorf("%s asks for %d CPUs but full-pcpus-only takes whole cores of %d threads; request a multiple of %d", who, n, tpc, tpc)
		}
		m, need = modeFullCores, n/tpc
	}

	// 2. The last run's hold.
	if req.grow == nil {
		if own, ok := a.ownHoldFits(req, n); ok {
			// Already held: infra does not change.
			return own.CPUs, own.Reserved, nil
		}
	}
	// 3. to 5. The pod's held CPUs, the NUMA nodes, the cores.
	infraBefore := a.markInfra()
	cpus, reserved, err := a.placeReusing(req, who, n, need, m)
	if err != nil {
		return cpuset.New(), cpuset.New(), err
	}
	// 6. Infra's minimum.
	if err := a.checkInfraBudget(req, who, infraBefore.cpus, cpus, reserved); err != nil {
		return cpuset.New(), cpuset.New(), err
	}
	return cpus, reserved, nil
}

// placeReusing places a request, preferring the CPUs its pod holds for
// stopped containers it may reuse (as the kubelet gives an init
// container's CPUs to the pod's app containers): within them alone when
// they suffice, otherwise together with the free CPUs.
func (a *Allocator) placeReusing(req Request, who string, n, need int, m mode) (cpuset.CPUSet, cpuset.CPUSet, error) {
	reuse := a.reusableFor(req)
	if reuse.IsEmpty() {
		return a.plan(req, who, n, need, m)
	}
	pool := a.views[req.Pool].cpus
	if reuse.Size() >= n {
		undo := a.lend(reuse, true, pool)
		cpus, reserved, err := a.plan(req, who, n, need, m)
		undo()
		if err == nil {
			return cpus, reserved, nil
		}
	}
	undo := a.lend(reuse, false, pool)
	defer undo()
	return a.plan(req, who, n, need, m)
}

// plan runs the placement rules over the CPUs that look free.
func (a *Allocator) plan(req Request, who string, n, need int, m mode) (cpuset.CPUSet, cpuset.CPUSet, error) {
	view := a.views[req.Pool]
	more := "" // a growing container asks for more CPUs
	if req.grow != nil {
		more = "more "
	}
	p := a.newPlanner(req, m)
	nodes, total := p.candidateNodes(view, req)
	if total < need {
		free := a.FreeCPUs(req.Pool)
		where := ""
		if !req.NUMANodes.IsEmpty() {
			where = fmt.Sprintf(" on NUMA nodes %s", req.NUMANodes)
		}
		unit := plural.Verb(n, "CPU", "CPUs")
		switch m {
		case modeFullCores:
			unit += fmt.Sprintf(" as whole cores (%s free)", plural.Count(total, "whole core"))
		case modeHideSiblings:
			unit += fmt.Sprintf(" with idle siblings (%s free)", plural.Count(total, "whole core"))
		}
		why := ""
		if m == modeHideSiblings {
			why = a.offlineSetAside(view)
		}
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s cannot fit %s: it asks for %d %s%s%s, but %s%s",
			req.Pool, who, n, more, unit, where, freeText(free, a.layout.Pool(req.Pool).Size()), why)
	}

	if a.fit != nil && !a.fit.MemoryIgnored() {
		// 0.: memory. When the candidate nodes together cannot hold it, no
		// set of them can: hugepages refuse, a memory limit is set aside,
		// at once rather than after trying every combination.
		if err, refused := a.fit.Refusal(req.Pool, who, p.memNodes(nodes)); refused {
			return cpuset.New(), cpuset.New(), err
		}
	}
	// 4. and 5.: the best plan over the nodes, its cores taken inside them.
	best, ok := p.bestPlan(nodes, need, req)
	if ok {
		a.planNodes = append(a.planNodes[:0], best.nodes...)
	}
	if !ok {
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s cannot fit %s: distribute-across-numa gives each NUMA node used an equal share of the %d CPUs, and no set of nodes has room for equal shares (free CPUs by node: %s); lower the request or turn distribute-across-numa off", req.Pool, who, n, freeByNode(nodes))
	}
	return best.cpus, best.reserved, nil
}

// freeText says how many of a pool's size CPUs are free, and which: "only
// 2 of the pool's 8 CPUs are free (free: "6,14")", "none of the pool's 8
// CPUs are free", "the pool has no CPUs".
func freeText(free cpuset.CPUSet, size int) string {
	switch {
	case size == 0:
		return "the pool has no CPUs"
	case free.IsEmpty():
		return fmt.Sprintf("none of the pool's %s %s free", plural.Count(size, "CPU"), plural.Verb(size, "is", "are"))
	}
	return fmt.Sprintf("only %d of the pool's %s %s free (free: %q)", free.Size(), plural.Count(size, "CPU"), plural.Verb(free.Size(), "is", "are"), free.String())
}

// newPlanner prepares the evaluation of placements for req in mode m.
func (a *Allocator) newPlanner(req Request, m mode) *planner {
	p := &planner{a: a, mode: m, tpc: a.x.threadsPerCore, s: &a.scratch}
	p.s.arena, p.s.flags, p.s.combos, p.s.cands = p.s.arena[:0], p.s.flags[:0], p.s.combos[:0], p.s.cands[:0]
	if req.grow != nil {
		p.self = req.grow.ID
		p.home = a.x.numaNodesOf(req.grow.CPUs)
		for _, id := range req.grow.CPUs.UnsortedList() {
			if !slices.Contains(p.homeSockets, a.x.cpus[id].socket) {
				p.homeSockets = append(p.homeSockets, a.x.cpus[id].socket)
			}
		}
	}
	return p
}

// candidateNodes returns the view's nodes the request may use that have
// room, with their room in units, and the total. A node without free CPUs
// may still give a request its memory (rule 0): then its CPUs come from
// another node of the plan. Such a node is a candidate for a request that
// asks for hugepages, and for a memory limit only when the nodes with free
// CPUs together cannot hold it: a combination is weighed for every subset
// of the candidates, so each needless one doubles the search.
func (p *planner) candidateNodes(view *poolView, req Request) ([]nodeCap, int) {
	nodes := p.s.nodeCaps(len(view.nodes))
	total, idle := 0, 0
	for i := range view.nodes {
		nv := &view.nodes[i]
		if !req.NUMANodes.IsEmpty() && !req.NUMANodes.Contains(nv.id) {
			continue
		}
		if nc := p.nodeCapacity(nv); nc.cap > 0 || p.a.fit != nil {
			nodes = append(nodes, nc)
			total += nc.cap
			if nc.cap == 0 {
				idle++
			}
		}
	}
	if f := p.a.fit; f != nil && idle > 0 && !f.AsksHugePages() {
		busy := p.s.nodeCaps(len(nodes) - idle)
		for _, nc := range nodes {
			if nc.cap > 0 {
				busy = append(busy, nc)
			}
		}
		if f.MemoryIgnored() || f.Fits(p.memNodes(busy)) {
			nodes = busy
		}
	}
	return nodes, total
}

// checkInfraBudget refuses an exclusive-non-isolcpus placement that would
// shrink infra (infraBefore, as it was before the decision) below
// minInfraCPUs. CPUs the pod already held are out of infra already; a
// decision that does not shrink infra is never refused. The placement
// holds cpus and reserved.
func (a *Allocator) checkInfraBudget(req Request, who string, infraBefore, cpus, reserved cpuset.CPUSet) error {
	if req.Pool != pools.ExclusiveNonIsolcpus {
		return nil
	}
	// Made here, not by the caller: every other pool's placement, on the
	// path of a creation's reply, needs no union (issue 45).
	held := cpus.Union(reserved)
	after := infraBefore.Difference(held)
	if own, ok := a.holds[req.Pod.UID+"/"+req.Container]; ok && req.Pod.UID != "" {
		// What the new run does not reuse of its own hold goes back.
		after = after.Union(own.Held().Difference(held).Intersection(a.layout.Pool(pools.Infra)))
	}
	// Counted on the CPUs the kernel balances: infra's isolated CPUs (a
	// count smaller than the isolated set) do not keep the host running.
	if left := a.layout.Balanced(after).Size(); left < a.layout.MinInfraCPUs && left < a.layout.Balanced(infraBefore).Size() {
		return fmt.Errorf("pool %s cannot fit %s: it needs %d CPUs from infra, but infra (%s) must keep %d not isolated (pools.exclusive-non-isolcpus.minInfraCPUs)",
			req.Pool, who, held.Intersection(infraBefore).Size(), infraBefore, a.layout.MinInfraCPUs)
	}
	return nil
}

// ownHoldFits returns the hold of the container's last run if the new run
// can take it as it is: same pool, same size, within the NUMA nodes asked.
func (a *Allocator) ownHoldFits(req Request, n int) (*Hold, bool) {
	if req.Pod.UID == "" {
		return nil, false
	}
	own, ok := a.holds[req.Pod.UID+"/"+req.Container]
	if !ok || own.Pool != req.Pool || own.CPUs.Size() != n || !own.Held().IsSubsetOf(a.keepable(req.Pool)) {
		return nil, false
	}
	if !req.NUMANodes.IsEmpty() && !a.x.numaNodesOf(own.CPUs).IsSubsetOf(req.NUMANodes) {
		return nil, false
	}
	if a.fit != nil && !a.fit.Fits(a.memNodesOf(a.x.numaNodes(own.CPUs))) {
		return nil, false // its memory no longer fits there
	}
	return own, true
}

// freeByNode describes the free units of each node, for errors.
func freeByNode(nodes []nodeCap) string {
	parts := make([]string, len(nodes))
	for i, nc := range nodes {
		parts[i] = fmt.Sprintf("node %d: %d", nc.v.id, nc.cap)
	}
	return strings.Join(parts, ", ")
}
