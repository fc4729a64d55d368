package allocator

import (
	"slices"

	"k8s.io/utils/cpuset"
)

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
