package allocator

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// mode is the unit an exclusive request is counted and taken in.
type mode int

const (
	// modeThreads takes logical CPUs, whole cores first.
	modeThreads mode = iota
	// modeFullCores takes only complete, entirely free cores.
	modeFullCores
	// modeHideSiblings takes one thread of each entirely free core and
	// keeps its siblings idle.
	modeHideSiblings
)

// CPUsFor converts a CPU request in milli-CPUs to whole exclusive CPUs,
// rounding up so that a request is never shortchanged.
func CPUsFor(milliCPU int64) int {
	if milliCPU <= 0 {
		return 0
	}
	return int((milliCPU + 999) / 1000)
}

// placeExclusive chooses CPUs for an exclusive request; see README
// "Placement rules" for the order of preferences.
func (a *Allocator) placeExclusive(req Request) (cpuset.CPUSet, cpuset.CPUSet, error) {
	who := "container " + req.Pod.ContainerName(req.Container)
	n := CPUsFor(req.MilliCPU)
	if n == 0 {
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s gives whole CPUs by the container's CPU request, but %s requests no CPU; set resources.requests.cpu (e.g. \"2\")", req.Pool, who)
	}
	view := a.views[req.Pool]
	if view.cpus.IsEmpty() {
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s has no CPUs on this node; configure pools.%s", req.Pool, req.Pool)
	}
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

	if own, ok := a.ownHoldFits(req, n); ok {
		// Already held: infra does not change.
		return own.CPUs, own.Reserved, nil
	}
	infraBefore := a.PoolCPUs(pools.Infra)
	cpus, reserved, err := a.placeReusing(req, who, n, need, m)
	if err != nil {
		return cpuset.New(), cpuset.New(), err
	}
	if err := a.checkInfraBudget(req, who, infraBefore, cpus.Union(reserved)); err != nil {
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
	tpc := a.x.threadsPerCore
	p := planner{a: a, mode: m, tpc: tpc}
	var nodes []nodeCap
	total := 0
	for i := range view.nodes {
		nv := &view.nodes[i]
		if !req.NUMANodes.IsEmpty() && !req.NUMANodes.Contains(nv.id) {
			continue
		}
		c := p.nodeCapacity(nv)
		if c > 0 {
			nodes = append(nodes, nodeCap{nv, c})
			total += c
		}
	}
	if total < need {
		free := a.FreeCPUs(req.Pool)
		where := ""
		if !req.NUMANodes.IsEmpty() {
			where = fmt.Sprintf(" on NUMA nodes %s", req.NUMANodes)
		}
		unit := "CPUs"
		switch m {
		case modeFullCores:
			unit = fmt.Sprintf("CPUs as whole cores (%d free whole cores)", total)
		case modeHideSiblings:
			unit = fmt.Sprintf("CPUs with idle siblings (%d free whole cores)", total)
		}
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s cannot fit %s: it asks for %d %s%s, but only %d of the pool's %d CPUs are free (free: %q)",
			req.Pool, who, n, unit, where, free.Size(), a.layout.Pool(req.Pool).Size(), free.String())
	}

	best, ok := p.bestPlan(nodes, need, req)
	if !ok {
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s cannot fit %s: %d CPUs are free but cannot be spread evenly over NUMA nodes (distribute-across-numa)", req.Pool, who, n)
	}
	return best.cpus, best.reserved, nil
}

// checkInfraBudget refuses an exclusive-non-isolcpus placement that would
// shrink infra (infraBefore, as it was before the decision) below
// minInfraCPUs. CPUs the pod already held are out of infra already; a
// decision that does not shrink infra is never refused.
func (a *Allocator) checkInfraBudget(req Request, who string, infraBefore, held cpuset.CPUSet) error {
	if req.Pool != pools.ExclusiveNonIsolcpus {
		return nil
	}
	after := infraBefore.Difference(held)
	if own, ok := a.holds[req.Pod.UID+"/"+req.Container]; ok && req.Pod.UID != "" {
		// What the new run does not reuse of its own hold goes back.
		after = after.Union(own.Held().Difference(held).Intersection(a.layout.Pool(pools.Infra)))
	}
	if after.Size() < a.layout.MinInfraCPUs && after.Size() < infraBefore.Size() {
		return fmt.Errorf("pool %s cannot fit %s: it needs %d CPUs from infra, but infra (%s) must keep %d (pools.exclusive-non-isolcpus.minInfraCPUs)",
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
	if !ok || own.Pool != req.Pool || own.CPUs.Size() != n || !own.Held().IsSubsetOf(a.layout.Pool(req.Pool)) {
		return nil, false
	}
	if !req.NUMANodes.IsEmpty() && !a.x.topo.NUMANodesOf(own.CPUs).IsSubsetOf(req.NUMANodes) {
		return nil, false
	}
	return own, true
}

type nodeCap struct {
	v   *nodeView
	cap int
}

// planner evaluates candidate placements for one request.
type planner struct {
	a    *Allocator
	mode mode
	tpc  int
}

// plan is a candidate placement with the figures it is judged by.
type plan struct {
	cpus, reserved cpuset.CPUSet
	nodes          []int
	hintMisses     int
	sockets        int
	distance       int
	splitCores     int
	l3Groups       int
	leftover       int
}

// better orders plans by the placement rules: fewest NUMA nodes (fixed
// by the caller), the devices' nodes, fewest sockets, closest nodes, no
// split cores, fewest L3 groups, then best fit and lowest node ids.
func (p *plan) better(q *plan) bool {
	switch {
	case p.hintMisses != q.hintMisses:
		return p.hintMisses < q.hintMisses
	case p.sockets != q.sockets:
		return p.sockets < q.sockets
	case p.distance != q.distance:
		return p.distance < q.distance
	case p.splitCores != q.splitCores:
		return p.splitCores < q.splitCores
	case p.l3Groups != q.l3Groups:
		return p.l3Groups < q.l3Groups
	case p.leftover != q.leftover:
		return p.leftover < q.leftover
	}
	for i := range p.nodes {
		if p.nodes[i] != q.nodes[i] {
			return p.nodes[i] < q.nodes[i]
		}
	}
	return false
}

// bestPlan tries the fewest NUMA nodes first and, among the combinations
// of that many nodes that fit, returns the best plan.
func (p *planner) bestPlan(nodes []nodeCap, need int, req Request) (*plan, bool) {
	for k := 1; k <= len(nodes); k++ {
		var best *plan
		forEachCombination(len(nodes), k, func(idx []int) {
			combo := make([]nodeCap, k)
			sum := 0
			for i, j := range idx {
				combo[i] = nodes[j]
				sum += nodes[j].cap
			}
			if sum < need {
				return
			}
			amounts, ok := p.amounts(combo, need, req.Options.DistributeAcrossNUMA)
			if !ok {
				return
			}
			cand := p.build(combo, amounts, req)
			cand.leftover = sum - need
			if best == nil || cand.better(best) {
				best = cand
			}
		})
		if best != nil {
			return best, true
		}
	}
	return nil, false
}

// amounts splits need over the nodes of a combination: evenly when
// distributing, otherwise filling the nodes with the least room first so
// that roomier nodes stay whole for later requests.
func (p *planner) amounts(combo []nodeCap, need int, distribute bool) ([]int, bool) {
	out := make([]int, len(combo))
	order := make([]int, len(combo))
	for i := range order {
		order[i] = i
	}
	if distribute {
		sort.SliceStable(order, func(a, b int) bool { return combo[order[a]].cap > combo[order[b]].cap })
		for rank, i := range order {
			out[i] = need / len(combo)
			if rank < need%len(combo) {
				out[i]++
			}
			if out[i] > combo[i].cap || out[i] == 0 {
				return nil, false
			}
		}
		return out, true
	}
	sort.SliceStable(order, func(a, b int) bool { return combo[order[a]].cap < combo[order[b]].cap })
	rest := need
	for _, i := range order {
		out[i] = min(combo[i].cap, rest)
		rest -= out[i]
	}
	// Every node of a minimal combination must contribute.
	for _, v := range out {
		if v == 0 {
			return nil, false
		}
	}
	return out, rest == 0
}

func (p *planner) build(combo []nodeCap, amounts []int, req Request) *plan {
	pl := &plan{}
	var cpus, reserved []int
	sockets := map[int]bool{}
	for i, nc := range combo {
		c, r, split, l3s := p.takeFromNode(nc.v, amounts[i])
		cpus = append(cpus, c...)
		reserved = append(reserved, r...)
		pl.splitCores += split
		pl.l3Groups += l3s
		pl.nodes = append(pl.nodes, nc.v.id)
		sockets[nc.v.socket] = true
		for _, other := range combo[i+1:] {
			pl.distance += p.a.x.distance[p.a.x.nodePos[nc.v.id]][p.a.x.nodePos[other.v.id]]
		}
	}
	pl.sockets = len(sockets)
	for _, h := range req.PreferNUMA.UnsortedList() {
		found := false
		for _, id := range pl.nodes {
			found = found || id == h
		}
		if !found {
			pl.hintMisses++
		}
	}
	pl.cpus, pl.reserved = cpuset.New(cpus...), cpuset.New(reserved...)
	return pl
}

// coreState is a core's free threads at decision time.
type coreState struct {
	core  *coreView
	free  []int
	whole bool // every pool thread of the core is free
}

func (p *planner) state(c *coreView) coreState {
	n := 0
	for _, t := range c.threads {
		if p.a.owner[t] == "" {
			n++
		}
	}
	switch n {
	case len(c.threads):
		// Shares the view's slice: callers only copy out of free.
		return coreState{core: c, free: c.threads, whole: true}
	case 0:
		return coreState{core: c}
	}
	s := coreState{core: c, free: make([]int, 0, n)}
	for _, t := range c.threads {
		if p.a.owner[t] == "" {
			s.free = append(s.free, t)
		}
	}
	return s
}

// unitsOf tells how many units a core can give in the current mode: 0 when
// it cannot give any.
func (p *planner) unitsOf(s coreState) int {
	switch p.mode {
	case modeFullCores:
		if s.whole && s.core.complete && len(s.free) == p.tpc {
			return 1
		}
		return 0
	case modeHideSiblings:
		if s.whole {
			return 1
		}
		return 0
	}
	return len(s.free)
}

func (p *planner) l3Capacity(l3 *l3View) int {
	c := 0
	for i := range l3.cores {
		c += p.unitsOf(p.state(&l3.cores[i]))
	}
	return c
}

func (p *planner) nodeCapacity(nv *nodeView) int {
	c := 0
	for i := range nv.l3s {
		c += p.l3Capacity(&nv.l3s[i])
	}
	return c
}

// takeFromNode picks need units inside one NUMA node: in a single L3 group
// when one can hold them (the one that splits fewest cores, then the
// fullest), otherwise in as few L3 groups as possible.
func (p *planner) takeFromNode(nv *nodeView, need int) (cpus, reserved []int, split, l3s int) {
	type l3Cap struct {
		l3  *l3View
		cap int
	}
	var groups []l3Cap
	for i := range nv.l3s {
		if c := p.l3Capacity(&nv.l3s[i]); c > 0 {
			groups = append(groups, l3Cap{&nv.l3s[i], c})
		}
	}
	var bestSingle *l3Cap
	bestSplit := 0
	for i := range groups {
		g := &groups[i]
		if g.cap < need {
			continue
		}
		_, _, s := p.takeFromL3(g.l3, need)
		if bestSingle == nil || s < bestSplit || (s == bestSplit && g.cap < bestSingle.cap) {
			bestSingle, bestSplit = g, s
		}
	}
	if bestSingle != nil {
		c, r, s := p.takeFromL3(bestSingle.l3, need)
		return c, r, s, 1
	}
	// Largest groups first keeps the count low; the last one is the
	// smallest that covers what remains (best fit).
	sort.SliceStable(groups, func(a, b int) bool { return groups[a].cap > groups[b].cap })
	rest := need
	for len(groups) > 0 && rest > 0 {
		pick := 0
		if groups[0].cap >= rest {
			for i := range groups {
				if groups[i].cap >= rest {
					pick = i
				}
			}
		}
		g := groups[pick]
		groups = append(groups[:pick], groups[pick+1:]...)
		take := min(g.cap, rest)
		c, r, s := p.takeFromL3(g.l3, take)
		cpus, reserved = append(cpus, c...), append(reserved, r...)
		split += s
		l3s++
		rest -= take
	}
	return cpus, reserved, split, l3s
}

// takeFromL3 picks need units from one L3 group. Whole cores (full-cores
// and hide-siblings modes) come from the first eligible cores; threads are
// taken in the passes of takeThreads.
func (p *planner) takeFromL3(l3 *l3View, need int) (cpus, reserved []int, split int) {
	states := make([]coreState, len(l3.cores))
	for i := range l3.cores {
		states[i] = p.state(&l3.cores[i])
	}
	if p.mode == modeThreads {
		return p.takeThreads(states, need)
	}
	cpus, reserved = p.takeCores(states, need)
	return cpus, reserved, 0
}

// takeCores takes need whole cores. With hidden siblings, only the first
// thread of each runs the container; the others are held idle (reserved).
func (p *planner) takeCores(states []coreState, need int) (cpus, reserved []int) {
	for _, s := range states {
		if need == 0 {
			break
		}
		if p.unitsOf(s) == 0 {
			continue
		}
		if p.mode == modeHideSiblings {
			cpus = append(cpus, s.free[0])
			reserved = append(reserved, s.free[1:]...)
		} else {
			cpus = append(cpus, s.free...)
		}
		need--
	}
	return cpus, reserved
}

// takeThreads takes need threads so that the fewest whole free cores are
// broken: it serves an odd remainder from a core that is already partly
// used, takes whole free cores while they fit, then the rest of the partly
// used cores, and splits a whole core only when nothing else is left;
// split counts the whole cores it had to break.
func (p *planner) takeThreads(states []coreState, need int) (cpus []int, reserved []int, split int) {
	t := threadTaker{states: states, used: make([]bool, len(states)), need: need}
	partial := t.partlyUsedFullestFirst()
	t.remainderFrom(partial, need%p.tpc)
	t.wholeCoresThatFit()
	t.restFrom(partial)
	split = t.splitWholeCores()
	return t.cpus, nil, split
}

// threadTaker is the bookkeeping of takeThreads' passes: each core is taken
// from at most once.
type threadTaker struct {
	states []coreState
	used   []bool
	need   int
	cpus   []int
}

func (t *threadTaker) take(i, k int) {
	t.cpus = append(t.cpus, t.states[i].free[:k]...)
	t.used[i] = true
	t.need -= k
}

// partlyUsedFullestFirst lists the cores with some threads held and some
// free, fewest free first: they are where a remainder belongs.
func (t *threadTaker) partlyUsedFullestFirst() []int {
	var partial []int
	for i, s := range t.states {
		if !s.whole && len(s.free) > 0 {
			partial = append(partial, i)
		}
	}
	sort.SliceStable(partial, func(a, b int) bool { return len(t.states[partial[a]].free) < len(t.states[partial[b]].free) })
	return partial
}

// remainderFrom serves the part of the request that whole cores cannot
// (rem threads) from the fullest partly used core that has room.
func (t *threadTaker) remainderFrom(partial []int, rem int) {
	if rem == 0 {
		return
	}
	for _, i := range partial {
		if len(t.states[i].free) >= rem {
			t.take(i, rem)
			return
		}
	}
}

// wholeCoresThatFit takes whole free cores that fit in what is still needed.
func (t *threadTaker) wholeCoresThatFit() {
	for i, s := range t.states {
		if t.need == 0 {
			return
		}
		if s.whole && !t.used[i] && len(s.free) <= t.need {
			t.take(i, len(s.free))
		}
	}
}

// restFrom takes what partly used cores still have.
func (t *threadTaker) restFrom(partial []int) {
	for _, i := range partial {
		if t.need == 0 {
			return
		}
		if !t.used[i] {
			t.take(i, min(t.need, len(t.states[i].free)))
		}
	}
}

// splitWholeCores breaks whole free cores for what is left and returns how
// many it broke.
func (t *threadTaker) splitWholeCores() int {
	split := 0
	for i, s := range t.states {
		if t.need == 0 {
			break
		}
		if s.whole && !t.used[i] {
			t.take(i, t.need)
			split++
		}
	}
	return split
}

// forEachCombination calls fn with every k-subset of 0..n-1 in
// lexicographic order.
func forEachCombination(n, k int, fn func([]int)) {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	for {
		fn(idx)
		i := k - 1
		for i >= 0 && idx[i] == n-k+i {
			i--
		}
		if i < 0 {
			return
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}
