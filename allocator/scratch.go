package allocator

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
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

// placeExclusive chooses CPUs for an exclusive request; see README
// "Placement rules" for the order of preferences.
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

	if req.grow == nil {
		if own, ok := a.ownHoldFits(req, n); ok {
			// Already held: infra does not change.
			return own.CPUs, own.Reserved, nil
		}
	}
	infraBefore := a.markInfra()
	cpus, reserved, err := a.placeReusing(req, who, n, need, m)
	if err != nil {
		return cpuset.New(), cpuset.New(), err
	}
	if err := a.checkInfraBudget(req, who, infraBefore.cpus, cpus.Union(reserved)); err != nil {
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
		unit := "CPUs"
		switch m {
		case modeFullCores:
			unit = fmt.Sprintf("CPUs as whole cores (%d free whole cores)", total)
		case modeHideSiblings:
			unit = fmt.Sprintf("CPUs with idle siblings (%d free whole cores)", total)
		}
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s cannot fit %s: it asks for %d %s%s%s, but only %d of the pool's %d CPUs are free (free: %q)",
			req.Pool, who, n, more, unit, where, free.Size(), a.layout.Pool(req.Pool).Size(), free.String())
	}

	best, ok := p.bestPlan(nodes, need, req)
	if !ok {
		return cpuset.New(), cpuset.New(), fmt.Errorf("pool %s cannot fit %s: distribute-across-numa gives each NUMA node used an equal share of the %d CPUs, and no set of nodes has room for equal shares (free CPUs by node: %s); lower the request or turn distribute-across-numa off", req.Pool, who, n, freeByNode(nodes))
	}
	return best.cpus, best.reserved, nil
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
// room, with their room in units, and the total.
func (p *planner) candidateNodes(view *poolView, req Request) ([]nodeCap, int) {
	nodes := p.s.nodeCaps(len(view.nodes))
	total := 0
	for i := range view.nodes {
		nv := &view.nodes[i]
		if !req.NUMANodes.IsEmpty() && !req.NUMANodes.Contains(nv.id) {
			continue
		}
		if nc := p.nodeCapacity(nv); nc.cap > 0 {
			nodes = append(nodes, nc)
			total += nc.cap
		}
	}
	return nodes, total
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
	if !req.NUMANodes.IsEmpty() && !a.x.numaNodesOf(own.CPUs).IsSubsetOf(req.NUMANodes) {
		return nil, false
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

// nodeCap is a node's room for a request: cap units in all, and in
// threads mode byFree[f] cores with f free threads.
type nodeCap struct {
	v      *nodeView
	cap    int
	byFree []int
}

// planner evaluates candidate placements for one request.
type planner struct {
	a    *Allocator
	mode mode
	tpc  int
	// self and home are set when a running container grows: its own
	// threads complete a core rather than share it, and its NUMA nodes
	// are where the new CPUs belong.
	self        string
	home        cpuset.CPUSet
	homeSockets []int
	// s is the allocator's working memory, reused by every decision.
	s *scratch
}

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
	splitCores          int // entirely free cores broken
	l3Groups            int
	leftover            int
}

// better orders plans by the placement rules (README "Placement rules"),
// rule 1, the number of NUMA nodes, being fixed by the caller (a growing
// container's own nodes come first of all: see Resize):
//  2. the devices' NUMA nodes (fewest devices' nodes missed),
//  3. fewest sockets, then the closest nodes,
//  4. fewest physical cores touched — whole cores, so that no thread of a
//     core the container runs on belongs to anyone else — then fewest
//     entirely free cores broken,
//  5. fewest L3 groups,
//  6. best fit (least room left in the nodes used), then lowest node ids.
func (p *plan) better(q *plan) bool {
	switch {
	case p.homeMisses != q.homeMisses:
		return p.homeMisses < q.homeMisses
	case p.hintMisses != q.hintMisses:
		return p.hintMisses < q.hintMisses
	case p.sockets != q.sockets:
		return p.sockets < q.sockets
	case p.distance != q.distance:
		return p.distance < q.distance
	case p.cores != q.cores:
		return p.cores < q.cores
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
//
// It is a branch and bound, so that a decision picks CPUs in few nodes
// rather than in every combination: the figures of a combination that do
// not depend on which CPUs are taken (nodes, sockets, distance, hints, room
// left) are exact before any is picked, and the others have a floor (each
// node touches at least one L3 group and the cores its share needs, and
// breaks no whole core). Combinations are built in the order of those
// bounds, and the search stops at the first whose bound is no better than
// the best plan built: no plan can be better than its bound. better is a
// total order (the node ids settle every tie), so the result is the plan an
// exhaustive search would return.
func (p *planner) bestPlan(nodes []nodeCap, need int, req Request) (*plan, bool) {
	for k := 1; k <= len(nodes); k++ {
		cands := p.s.cands[:0]
		forEachCombination(len(nodes), k, func(idx []int) {
			combo := p.s.nodeCaps(k)
			sum := 0
			for _, j := range idx {
				combo = append(combo, nodes[j])
				sum += nodes[j].cap
			}
			if sum < need {
				return
			}
			amounts, ok := p.amounts(combo, need, req.Options.DistributeAcrossNUMA)
			if !ok {
				return
			}
			c := candidate{combo: combo, amounts: amounts, bound: p.outline(combo, req)}
			c.bound.leftover = sum - need
			c.bound.cores, c.bound.l3Groups = p.floors(combo, amounts)
			cands = append(cands, c)
		})
		p.s.cands = cands[:0] // keep what it grew to
		if len(cands) == 0 {
			continue
		}
		slices.SortFunc(cands, func(x, y candidate) int {
			switch {
			case x.bound.better(&y.bound):
				return -1
			case y.bound.better(&x.bound):
				return 1
			}
			return 0 // the same combination: node ids settle every other tie
		})
		var best *plan
		for i := range cands {
			c := &cands[i]
			if best != nil && !c.bound.better(best) {
				break
			}
			if cand := p.build(c); best == nil || cand.better(best) {
				best = cand
			}
		}
		best.cpus, best.reserved = cpuset.New(best.picked...), cpuset.New(best.reservedIDs...)
		return best, true
	}
	return nil, false
}

// candidate is a combination of nodes that has room for the request, with
// each node's share and the bound of any plan built on it.
type candidate struct {
	combo   []nodeCap
	amounts []int
	bound   plan
}

// floors returns the fewest physical cores and L3 groups that taking
// amounts from the nodes of combo can touch: the cores with the most free
// threads first, in threads mode; one core per unit otherwise; at least
// one L3 group per node.
func (p *planner) floors(combo []nodeCap, amounts []int) (cores, l3Groups int) {
	for i, n := range amounts {
		if p.mode != modeThreads {
			cores += n
			continue
		}
		byFree := combo[i].byFree
		for f := len(byFree) - 1; f > 0 && n > 0; f-- {
			k := min(byFree[f], (n+f-1)/f)
			cores += k
			n -= k * f
		}
	}
	return cores, len(amounts)
}

// amounts splits need over the nodes of a combination: as evenly as
// possible when distributing, otherwise filling the nodes with the least
// room first so that roomier nodes stay whole for later requests.
func (p *planner) amounts(combo []nodeCap, need int, distribute bool) ([]int, bool) {
	if distribute {
		return p.distribute(combo, need)
	}
	out := p.s.ints(len(combo))
	if len(combo) == 1 {
		out[0] = min(combo[0].cap, need)
		return out, out[0] == need && need > 0
	}
	order := p.s.ints(len(combo))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return combo[a].cap - combo[b].cap })
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

// distribute splits need evenly over every node of a combination, in whole
// cores: each node gets the same number of cores, and the cores left over
// (and the odd CPUs of a request that is not whole cores) go one by one to
// the node with the most room left, which keeps the nodes' free CPUs as
// balanced as they can be (the kubelet's bestRemainder). When whole cores
// cannot give every node a share, it is done in CPUs.
func (p *planner) distribute(combo []nodeCap, need int) ([]int, bool) {
	unit := 1
	if p.mode == modeThreads {
		unit = p.tpc // in the other modes a unit already is a core
	}
	if out, ok := spread(combo, need, unit); ok || unit == 1 {
		return out, ok
	}
	return spread(combo, need, 1)
}

// spread gives each node need/len(combo) rounded down to whole chunks of
// unit, then the remaining chunks and the odd rest one at a time to the
// node with the most room left (the first such node on a tie).
func spread(combo []nodeCap, need, unit int) ([]int, bool) {
	k := len(combo)
	base := need / unit / k * unit
	if base == 0 {
		return nil, false
	}
	out := make([]int, k)
	room := make([]int, k)
	for i, nc := range combo {
		if nc.cap < base {
			return nil, false
		}
		out[i], room[i] = base, nc.cap-base
	}
	give := func(size int) bool {
		best := -1
		for i := range room {
			if room[i] >= size && (best < 0 || room[i] > room[best]) {
				best = i
			}
		}
		if best < 0 {
			return false
		}
		out[best] += size
		room[best] -= size
		return true
	}
	rest := need - base*k
	for ; rest >= unit; rest -= unit {
		if !give(unit) {
			return nil, false
		}
	}
	if rest > 0 && !give(rest) {
		return nil, false
	}
	return out, true
}

// outline returns the figures of a plan on combo that do not depend on
// which CPUs are taken.
func (p *planner) outline(combo []nodeCap, req Request) plan {
	pl := plan{nodes: p.s.ints(len(combo))[:0]}
	sockets := append(p.s.ints(len(combo) + len(p.homeSockets))[:0], p.homeSockets...)
	for i, nc := range combo {
		pl.nodes = append(pl.nodes, nc.v.id)
		if !slices.Contains(sockets, nc.v.socket) {
			sockets = append(sockets, nc.v.socket)
		}
		for _, other := range combo[i+1:] {
			pl.distance += p.a.x.distance[p.a.x.nodePos[nc.v.id]][p.a.x.nodePos[other.v.id]]
		}
		if p.self != "" && !p.home.Contains(nc.v.id) {
			pl.homeMisses++
			for _, h := range p.home.UnsortedList() {
				pl.distance += p.a.x.distance[p.a.x.nodePos[nc.v.id]][p.a.x.nodePos[h]]
			}
		}
	}
	pl.sockets = len(sockets)
	for _, h := range req.PreferNUMA.UnsortedList() {
		if !slices.Contains(pl.nodes, h) {
			pl.hintMisses++
		}
	}
	return pl
}

// build picks the CPUs of a candidate: its outline with the figures of the
// CPUs taken from each node.
func (p *planner) build(c *candidate) *plan {
	pl := c.bound
	pl.cores, pl.splitCores, pl.l3Groups = 0, 0, 0
	units := 0
	for _, n := range c.amounts {
		units += n
	}
	pl.picked, pl.reservedIDs = p.s.ints(units * p.tpc)[:0], p.s.ints(units * p.tpc)[:0]
	for i, nc := range c.combo {
		pk := p.takeFromNode(nc.v, c.amounts[i])
		pl.picked = append(pl.picked, pk.cpus...)
		pl.reservedIDs = append(pl.reservedIDs, pk.reserved...)
		pl.cores += pk.cores
		pl.splitCores += pk.split
		pl.l3Groups += pk.l3Groups
	}
	return &pl
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
	group int // position of the core's L3 group in its node view
	// mine is true when a growing container already runs on another
	// thread of the core: taking it completes the container's core.
	mine bool
}

func (p *planner) state(c *coreView) coreState {
	n, mine := 0, false
	for _, t := range c.threads {
		switch p.a.owner[t] {
		case "":
			n++
		case p.self:
			mine = p.self != ""
		}
	}
	switch n {
	case len(c.threads):
		// Shares the view's slice: callers only copy out of free.
		return coreState{core: c, free: c.threads, whole: c.complete}
	case 0:
		return coreState{core: c}
	}
	start := len(p.s.threads)
	for _, t := range c.threads {
		if p.a.owner[t] == "" {
			p.s.threads = append(p.s.threads, t)
		}
	}
	end := len(p.s.threads)
	return coreState{core: c, free: p.s.threads[start:end:end], mine: mine}
}

// unitsOf tells how many units a core gives in the current mode.
func (p *planner) unitsOf(s coreState) int {
	switch p.mode {
	case modeFullCores:
		if s.whole && len(s.free) == p.tpc {
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

func (p *planner) nodeCapacity(nv *nodeView) nodeCap {
	nc := nodeCap{v: nv, byFree: p.s.ints(p.tpc + 1)}
	for i := range nv.l3s {
		for j := range nv.l3s[i].cores {
			units, free := p.coreUnits(&nv.l3s[i].cores[j])
			nc.cap += units
			nc.byFree[free]++
		}
	}
	return nc
}

// coreUnits is unitsOf(state(c)) without building the state, and the
// number of the core's free threads.
func (p *planner) coreUnits(c *coreView) (units, free int) {
	for _, t := range c.threads {
		if !p.a.busy[t] {
			free++
		}
	}
	whole := free == len(c.threads) && c.complete
	switch p.mode {
	case modeFullCores:
		if whole && free == p.tpc {
			return 1, free
		}
		return 0, free
	case modeHideSiblings:
		if whole {
			return 1, free
		}
		return 0, free
	}
	return free, free
}

// pick is what taking units from some cores gives, with the figures a
// plan is judged by.
type pick struct {
	cpus, reserved []int
	cores, split   int
	l3Groups       int
}

// takeFromNode picks need units inside one NUMA node. The fewest cores
// touched (and whole cores broken) the node can offer is found first, over
// all its cores; one L3 group is used when one reaches those figures (the
// fullest such group), otherwise the cores are taken from the groups with
// the most whole cores first, so that few groups are used.
func (p *planner) takeFromNode(nv *nodeView, need int) pick {
	n := len(nv.l3s)
	total := 0
	for g := range nv.l3s {
		total += len(nv.l3s[g].cores)
	}
	sc := p.s
	sc.threads = sc.threads[:0]
	if cap(sc.states) < 2*total {
		sc.states = make([]coreState, 2*total)
	}
	states, flat := sc.states[:total], sc.states[total:2*total]
	sc.groups = slices.Grow(sc.groups[:0], 4*n+1)[:4*n+1]
	clear(sc.groups)
	caps, wholes, order, bounds := sc.groups[:n], sc.groups[n:2*n], sc.groups[2*n:3*n], sc.groups[3*n:]
	sc.mine = slices.Grow(sc.mine[:0], n)[:n]
	clear(sc.mine)
	mine := sc.mine
	for g := range nv.l3s {
		l3 := &nv.l3s[g]
		bounds[g+1] = bounds[g] + len(l3.cores)
		for i := range l3.cores {
			s := p.state(&l3.cores[i])
			s.group = g
			states[bounds[g]+i] = s
			caps[g] += p.unitsOf(s)
			if s.whole {
				wholes[g]++
			}
			mine[g] = mine[g] || s.mine || p.ownsAny(&l3.cores[i])
		}
	}
	group := func(g int) []coreState { return states[bounds[g]:bounds[g+1]] }
	if n == 1 {
		return p.takeFromCores(states, need)
	}
	for g := range order {
		order[g] = g
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if mine[a] != mine[b] {
			return boolFirst(mine[a])
		}
		if wholes[a] != wholes[b] {
			return wholes[b] - wholes[a]
		}
		return caps[b] - caps[a]
	})
	flat = flat[:0]
	for _, g := range order {
		flat = append(flat, group(g)...)
	}
	best := p.takeFromCores(flat, need)
	// One group when one reaches the node's figures: a growing container's
	// own group first, then the fullest.
	slices.SortStableFunc(order, func(a, b int) int {
		if mine[a] != mine[b] {
			return boolFirst(mine[a])
		}
		return caps[a] - caps[b]
	})
	for _, g := range order {
		if caps[g] < need {
			continue
		}
		if pk := p.takeFromCores(group(g), need); pk.cores == best.cores && pk.split == best.split {
			return pk
		}
	}
	return best
}

// ownsAny tells whether the growing container runs on a thread of the core.
func (p *planner) ownsAny(c *coreView) bool {
	if p.self == "" {
		return false
	}
	for _, t := range c.threads {
		if p.a.owner[t] == p.self {
			return true
		}
	}
	return false
}

// takeFromCores picks need units from cores, in their order: whole cores
// (full-cores and hide-siblings modes) in takeCores, threads in the passes
// of takeThreads.
func (p *planner) takeFromCores(states []coreState, need int) pick {
	if p.mode == modeThreads {
		return p.takeThreads(states, need)
	}
	return p.takeCores(states, need)
}

// takeCores takes need whole cores. With hidden siblings, only the first
// thread of each runs the container; the others are held idle (reserved).
func (p *planner) takeCores(states []coreState, need int) pick {
	var pk pick
	var groups groupSet
	for _, s := range states {
		if need == 0 {
			break
		}
		if p.unitsOf(s) == 0 {
			continue
		}
		pk.cores++
		pk.l3Groups += groups.add(s.group)
		if p.mode == modeHideSiblings {
			pk.cpus = append(pk.cpus, s.free[0])
			pk.reserved = append(pk.reserved, s.free[1:]...)
		} else {
			pk.cpus = append(pk.cpus, s.free...)
		}
		need--
	}
	return pk
}

// takeThreads takes need threads touching the fewest cores and breaking
// the fewest whole free cores: it serves a remainder (what whole cores
// cannot) from a core that is already partly used, takes whole free cores
// while they fit (the largest first), then the rest of the partly used
// cores, and breaks a whole core only when nothing else is left.
func (p *planner) takeThreads(states []coreState, need int) pick {
	sc := p.s
	sc.used = slices.Grow(sc.used[:0], len(states))[:len(states)]
	clear(sc.used)
	t := threadTaker{states: states, used: sc.used, need: need, partial: sc.partial[:0], whole: sc.whole[:0]}
	t.pk.cpus = sc.ints(need)[:0]
	t.groups = groupSet(sc.bools(8)[:0])
	partial, whole := t.partlyUsedFullestFirst(), t.wholeLargestFirst()
	sc.partial, sc.whole = partial, whole // keep what they grew to
	t.remainderFrom(partial, need%p.tpc)
	t.wholeCoresThatFit(whole)
	t.restFrom(partial)
	t.breakWholeCores(whole)
	return t.pk
}

// threadTaker is the bookkeeping of takeThreads' passes: each core is taken
// from at most once.
type threadTaker struct {
	states         []coreState
	used           []bool
	need           int
	pk             pick
	groups         groupSet
	partial, whole []int // empty buffers for the lists of cores below
}

func (t *threadTaker) take(i, k int) {
	s := t.states[i]
	t.pk.cpus = append(t.pk.cpus, s.free[:k]...)
	t.pk.cores++
	if s.whole && k < len(s.free) {
		t.pk.split++
	}
	t.pk.l3Groups += t.groups.add(s.group)
	t.used[i] = true
	t.need -= k
}

// partlyUsedFullestFirst lists the cores with some threads busy (held, or
// in another pool) and some free: a growing container's own cores first,
// then the fewest free first. They are where a remainder belongs.
func (t *threadTaker) partlyUsedFullestFirst() []int {
	partial := t.partial
	uniform := true // no core of a growing container, all as free: already in order
	for i, s := range t.states {
		if !s.whole && len(s.free) > 0 {
			uniform = uniform && !s.mine && (len(partial) == 0 || len(s.free) == len(t.states[partial[0]].free))
			partial = append(partial, i)
		}
	}
	if uniform { // the common case on SMT-2 nodes: one free thread each
		return partial
	}
	slices.SortStableFunc(partial, func(a, b int) int {
		sa, sb := t.states[a], t.states[b]
		if sa.mine != sb.mine {
			return boolFirst(sa.mine)
		}
		return len(sa.free) - len(sb.free)
	})
	return partial
}

// wholeLargestFirst lists the whole free cores, those with the most
// threads first (a core whose siblings are offline has fewer).
func (t *threadTaker) wholeLargestFirst() []int {
	whole := t.whole
	uniform := true
	for i, s := range t.states {
		if s.whole {
			uniform = uniform && (len(whole) == 0 || len(s.free) == len(t.states[whole[0]].free))
			whole = append(whole, i)
		}
	}
	if !uniform { // only offline siblings make cores differ
		slices.SortStableFunc(whole, func(a, b int) int { return len(t.states[b].free) - len(t.states[a].free) })
	}
	return whole
}

// remainderFrom serves rem threads from the first partly used core that
// has room.
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
func (t *threadTaker) wholeCoresThatFit(whole []int) {
	for _, i := range whole {
		if t.need == 0 {
			return
		}
		if !t.used[i] && len(t.states[i].free) <= t.need {
			t.take(i, len(t.states[i].free))
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

// breakWholeCores takes what is left from whole free cores, breaking them.
func (t *threadTaker) breakWholeCores(whole []int) {
	for _, i := range whole {
		if t.need == 0 {
			return
		}
		if !t.used[i] {
			t.take(i, t.need)
		}
	}
}

// groupSet counts distinct L3 groups by their position in a node view.
type groupSet []bool

// add marks group g and returns 1 when it was not marked yet.
func (g *groupSet) add(group int) int {
	for len(*g) <= group {
		*g = append(*g, false)
	}
	if (*g)[group] {
		return 0
	}
	(*g)[group] = true
	return 1
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

// boolFirst orders two different booleans, true first, for a sort's cmp.
func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}
