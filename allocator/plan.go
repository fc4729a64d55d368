package allocator

import (
	"slices"

	"k8s.io/utils/cpuset"
)

// better orders plans by the placement rules (docs/placement.md),
// rule 1, the number of NUMA nodes, being fixed by the caller (a growing
// container's own nodes come first of all: see Resize):
//  2. the devices' NUMA nodes (fewest devices' nodes missed),
//  3. fewest sockets (of the CPUs taken: a NUMA node may span two), then
//     the closest nodes,
//  4. fewest physical cores touched — whole cores, so that no thread of a
//     core the container runs on belongs to anyone else — then fewest
//     entirely free cores taken: the odd CPU of an odd request goes to a
//     core already partly used, and lone threads beside someone else's
//     only when no whole core is left,
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
	case p.wholeCores != q.wholeCores:
		return p.wholeCores < q.wholeCores
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
// not depend on which CPUs are taken (nodes, distance, hints, room left)
// are exact before any is picked, and the others have a floor (the sockets
// of the nodes that lie in one socket, the fewest cores and whole cores
// the nodes' tallies allow, one L3 group per node). Combinations are built
// in the order of those bounds, and the search stops at the first whose
// bound is no better than the best plan built: no plan can be better than
// its bound. better is a total order (the node ids settle every tie), so
// the result is the plan an exhaustive search would return.
func (p *planner) bestPlan(nodes []nodeCap, need int, req Request) (*plan, bool) {
	for k := 1; k <= len(nodes); k++ {
		cands := p.s.cands[:0]
		forEachCombination(len(nodes), k, func(idx []int) {
			combo := p.s.nodeCaps(k)
			for _, j := range idx {
				combo = append(combo, nodes[j])
			}
			if c, ok := p.candidate(combo, need, req); ok {
				cands = append(cands, c)
			}
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

// candidate returns the combination as a candidate, or false when it has
// not the room (or, distributing, no equal shares).
func (p *planner) candidate(combo []nodeCap, need int, req Request) (candidate, bool) {
	sum := 0
	for _, nc := range combo {
		sum += nc.cap
	}
	if sum < need {
		return candidate{}, false
	}
	if f := p.a.fit; f != nil && !f.Fits(p.memNodes(combo)) {
		return candidate{}, false // rule 0: its memory does not fit
	}
	c := candidate{combo: combo, need: need, bound: p.outline(combo, req)}
	if req.Options.DistributeAcrossNUMA {
		var ok bool
		if c.amounts, ok = p.distribute(combo, need); !ok {
			return candidate{}, false
		}
	}
	c.bound.leftover = sum - need
	c.bound.cores, c.bound.wholeCores, c.bound.l3Groups = p.floors(&c)
	return c, true
}

// floors returns the fewest physical cores and whole cores that the nodes'
// tallies allow, and one L3 group per node. Without distributing, the
// nodes' cores together: which node gives what is the cores' choice. No
// node of a minimal combination can be left out (a smaller combination
// would have had the room), so the floors are those of the union.
func (p *planner) floors(c *candidate) (cores, whole, l3Groups int) {
	if c.amounts == nil {
		all := c.combo[0].t
		if len(c.combo) > 1 {
			all = p.newTally()
			for _, nc := range c.combo {
				all.add(nc.t)
			}
		}
		cores, whole, _ = all.fewest(c.need)
		return cores, whole, len(c.combo)
	}
	for i, n := range c.amounts {
		cn, wn, _ := c.combo[i].t.fewest(n)
		cores += cn
		whole += wn
	}
	return cores, whole, len(c.combo)
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
		// A node that spans sockets counts none here: which of them it
		// uses is known once CPUs are picked (a plan uses at least one).
		if nc.v.socket >= 0 && !slices.Contains(sockets, nc.v.socket) {
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
	pl.sockets = max(len(sockets), 1)
	for _, h := range req.PreferNUMA.UnsortedList() {
		if !slices.Contains(pl.nodes, h) {
			pl.hintMisses++
		}
	}
	return pl
}

// build picks the CPUs of a candidate: its outline with the figures of the
// CPUs taken, from the nodes together or, distributing, from each node.
func (p *planner) build(c *candidate) *plan {
	pl := c.bound
	pl.cores, pl.wholeCores, pl.l3Groups = 0, 0, 0
	pl.picked, pl.reservedIDs = p.s.ints(c.need * p.tpc)[:0], p.s.ints(c.need * p.tpc)[:0]
	sockets := append(p.s.ints(len(p.homeSockets) + 2*len(c.combo))[:0], p.homeSockets...)
	add := func(pk pick) {
		pl.picked = append(pl.picked, pk.cpus...)
		pl.reservedIDs = append(pl.reservedIDs, pk.reserved...)
		pl.cores += pk.cores
		pl.wholeCores += pk.whole
		pl.l3Groups += pk.l3Groups
		for _, s := range pk.sockets {
			if !slices.Contains(sockets, s) {
				sockets = append(sockets, s)
			}
		}
	}
	if c.amounts == nil {
		add(p.take(p.groups(c.combo), c.need))
	} else {
		for i := range c.combo {
			add(p.take(p.groups(c.combo[i:i+1]), c.amounts[i]))
		}
	}
	pl.sockets = len(sockets)
	return &pl
}

// memNodes are the nodes whose memory serves a combination.
func (p *planner) memNodes(combo []nodeCap) []int {
	ids := p.s.ints(len(combo))[:0]
	for _, nc := range combo {
		ids = append(ids, nc.v.id)
	}
	return p.a.memNodesInto(p.s.ints(len(combo)), ids)
}
