package allocator

import (
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/plural"
)

// Which cores and threads a plan takes inside its NUMA nodes.
//
// The cores of the nodes are tallied by L3 group. The tallies alone tell the
// figures the rules judge by: the fewest sockets that can hold the request,
// then the fewest cores, then the fewest entirely free cores among them
// (the odd CPU of an odd request goes to a core that is already partly
// used, rather than breaking a whole one), then the fewest L3 groups that
// still reach those figures. Only then are the chosen groups' cores walked
// for their threads. Deciding on tallies first is what keeps a whole core
// of one node from losing to a lone thread of another: the figures are
// those of the whole pool, not of a share fixed in advance.

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
		// A hide-hyperthreads container holds the offline threads idle
		// too, once they are online: they must be its pool's and free.
		return coreState{core: c, free: c.threads, whole: c.complete && (p.mode != modeHideSiblings || p.hideable(c))}
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

// nodeCapacity returns a node's room for the request, with its cores
// tallied.
func (p *planner) nodeCapacity(nv *nodeView) nodeCap {
	nc := nodeCap{v: nv, t: p.newTally()}
	// Every node is weighed at each decision: the count is done here
	// without tally.count's checks (whole-core modes count units as whole
	// cores of one unit, so units index whole alike).
	part, whole := nc.t.part, nc.t.whole
	threads := p.mode == modeThreads
	for i := range nv.l3s {
		for j := range nv.l3s[i].cores {
			units, w := p.coreUnits(&nv.l3s[i].cores[j])
			nc.cap += units
			if w || !threads {
				whole[units]++
			} else {
				part[units]++
			}
		}
	}
	part[0], whole[0] = 0, 0 // cores that give nothing
	return nc
}

// coreUnits is unitsOf(state(c)) without building the state, and whether
// the core is entirely free.
func (p *planner) coreUnits(c *coreView) (units int, whole bool) {
	free := 0
	for _, t := range c.threads {
		if !p.a.busy[t] {
			free++
		}
	}
	whole = free == len(c.threads) && c.complete
	switch p.mode {
	case modeFullCores:
		if whole && free == p.tpc {
			return 1, true
		}
		return 0, false
	case modeHideSiblings:
		if whole && p.hideable(c) {
			return 1, true
		}
		return 0, false
	}
	return free, whole
}

func (p *planner) newTally() tally {
	n := p.s.ints(2 * (p.tpc + 1))
	return tally{part: n[: p.tpc+1 : p.tpc+1], whole: n[p.tpc+1:]}
}

// count adds a core that gives units.
func (t tally) count(units int, whole bool, m mode) {
	switch {
	case units == 0:
	case m != modeThreads:
		t.whole[1]++
	case whole:
		t.whole[units]++
	default:
		t.part[units]++
	}
}

func (t tally) add(u tally) {
	for f := range t.part {
		t.part[f] += u.part[f]
		t.whole[f] += u.whole[f]
	}
}

// fewest returns the fewest cores that can give need units, and the
// fewest entirely free cores among that many cores; ok is false when the
// tally cannot give need. Cores are counted largest first; then whole
// cores are traded for partly used ones for as long as that many cores
// still give need.
func (t tally) fewest(need int) (cores, whole int, ok bool) {
	rem := need
	for f := len(t.part) - 1; f >= 1 && rem > 0; f-- {
		k := min(t.part[f]+t.whole[f], (rem+f-1)/f)
		cores += k
		rem -= k * f
	}
	if rem > 0 {
		return 0, 0, false
	}
	for whole = 0; whole < cores; whole++ {
		if give(t.whole, whole)+give(t.part, cores-whole) >= need {
			break
		}
	}
	return cores, whole, true
}

// give is what the k largest cores of a histogram give, or -1 when it has
// fewer than k.
func give(byFree []int, k int) int {
	sum := 0
	for f := len(byFree) - 1; f >= 1 && k > 0; f-- {
		n := min(byFree[f], k)
		sum += n * f
		k -= n
	}
	if k > 0 {
		return -1 << 30
	}
	return sum
}

// pick is what taking units from some cores gives, with the figures a
// plan is judged by.
type pick struct {
	cpus, reserved []int
	cores          int
	whole          int // entirely free cores taken from, fully or not
	l3Groups       int
	sockets        []int
}

// groups gathers the L3 groups of the nodes with their cores' states.
func (p *planner) groups(nodes []nodeCap) []group {
	sc := p.s
	sc.threads = sc.threads[:0]
	total := 0
	for _, nc := range nodes {
		for g := range nc.v.l3s {
			total += len(nc.v.l3s[g].cores)
		}
	}
	sc.states = slices.Grow(sc.states[:0], total)[:total]
	gs := sc.groups[:0]
	at := 0
	for _, nc := range nodes {
		for g := range nc.v.l3s {
			l3 := &nc.v.l3s[g]
			gr := group{states: sc.states[at : at+len(l3.cores) : at+len(l3.cores)], t: p.newTally(), socket: l3.socket}
			for i := range l3.cores {
				s := p.state(&l3.cores[i])
				gr.states[i] = s
				units := p.unitsOf(s)
				gr.cap += units
				gr.t.count(units, s.whole, p.mode)
				gr.mine = gr.mine || s.mine || (p.self != "" && p.ownsAny(&l3.cores[i]))
			}
			at += len(l3.cores)
			gs = append(gs, gr)
		}
	}
	sc.groups = gs // keep what it grew to
	return gs
}

// take picks need units from the groups: inside the fewest sockets that can
// hold them, the best of those (a growing container's own sockets first,
// then fewest cores, whole cores, L3 groups, then the least room left: the
// fullest sockets).
func (p *planner) take(gs []group, need int) pick {
	sockets := p.s.ints(len(gs))[:0]
	for _, g := range gs {
		if !slices.Contains(sockets, g.socket) {
			sockets = append(sockets, g.socket)
		}
	}
	if len(sockets) == 1 {
		return p.takeWithin(gs, need)
	}
	room := p.s.ints(len(sockets))
	for _, g := range gs {
		room[slices.Index(sockets, g.socket)] += g.cap
	}
	fewest := p.fewestSockets(room, need)
	if fewest == len(sockets) {
		return p.takeWithin(gs, need)
	}
	var best pick
	bestRoom, bestNew := 0, 0
	forEachCombination(len(sockets), fewest, func(idx []int) {
		sum, added := 0, 0
		for _, i := range idx {
			sum += room[i]
			if !slices.Contains(p.homeSockets, sockets[i]) {
				added++
			}
		}
		if sum < need || (best.cpus != nil && added > bestNew) {
			return
		}
		pk := p.takeWithin(p.s.groupsIn(gs, sockets, idx), need)
		if best.cpus == nil || added < bestNew || pk.better(&best, sum, bestRoom) {
			best, bestRoom, bestNew = pk, sum, added
		}
	})
	return best
}

// fewestSockets is the fewest sockets whose room holds need.
func (p *planner) fewestSockets(room []int, need int) int {
	sorted := append(p.s.ints(len(room))[:0], room...)
	slices.Sort(sorted)
	sum := 0
	for i := len(sorted) - 1; i >= 0; i-- {
		sum += sorted[i]
		if sum >= need {
			return len(sorted) - i
		}
	}
	return len(sorted)
}

// better orders the picks of socket sets that hold a request: fewest
// cores, whole cores and L3 groups, then the least room in the sockets
// (roomier ones stay whole for larger requests); the first set on a tie.
func (pk *pick) better(q *pick, room, qRoom int) bool {
	switch {
	case pk.cores != q.cores:
		return pk.cores < q.cores
	case pk.whole != q.whole:
		return pk.whole < q.whole
	case pk.l3Groups != q.l3Groups:
		return pk.l3Groups < q.l3Groups
	}
	return room < qRoom
}

// takeWithin picks need units from the groups of one set of sockets. The
// fewest cores and whole cores the groups together can give need in are
// found from their tallies; then the fewest groups that still reach those
// figures: one group when one does (a growing container's own group
// first, then the fullest), else two, else the groups with the most whole
// cores first.
func (p *planner) takeWithin(gs []group, need int) pick {
	all := gs[0].t
	if len(gs) > 1 {
		all = p.newTally()
		for _, g := range gs {
			all.add(g.t)
		}
	}
	cores, whole, _ := all.fewest(need)
	reaches := func(t tally, room int) bool {
		if room < need {
			return false
		}
		c, w, ok := t.fewest(need)
		return ok && c == cores && w == whole
	}
	order := p.s.ints(len(gs))
	for i := range order {
		order[i] = i
	}
	fullestFirst := func(a, b int) int {
		if gs[a].mine != gs[b].mine {
			return boolFirst(gs[a].mine)
		}
		return gs[a].cap - gs[b].cap
	}
	slices.SortStableFunc(order, fullestFirst)
	chosen := p.s.ints(len(gs))[:0]
	for _, i := range order {
		if reaches(gs[i].t, gs[i].cap) {
			chosen = append(chosen, i)
			break
		}
	}
	if len(chosen) == 0 {
		chosen = p.twoGroups(gs, order, reaches)
	}
	if len(chosen) == 0 {
		chosen = p.groupsWithMostWholeCores(gs, order, reaches)
	}
	slices.SortStableFunc(chosen, fullestFirst)
	return p.takeCores(gs, chosen, cores, whole, need)
}

// twoGroups returns the two groups that reach the figures together, the
// fullest pair first, or nothing.
func (p *planner) twoGroups(gs []group, order []int, reaches func(tally, int) bool) []int {
	pair := p.newTally()
	best, bestRoom := p.s.ints(2)[:0], 0
	for x, i := range order {
		for _, j := range order[x+1:] {
			room := gs[i].cap + gs[j].cap
			if len(best) > 0 && room >= bestRoom {
				continue
			}
			clear(pair.part)
			clear(pair.whole)
			pair.add(gs[i].t)
			pair.add(gs[j].t)
			if reaches(pair, room) {
				best, bestRoom = append(best[:0], i, j), room
			}
		}
	}
	return best
}

// groupsWithMostWholeCores adds groups, those with the most whole cores
// (then room) first, until together they reach the figures.
func (p *planner) groupsWithMostWholeCores(gs []group, order []int, reaches func(tally, int) bool) []int {
	byWhole := append(p.s.ints(len(order))[:0], order...)
	slices.SortStableFunc(byWhole, func(a, b int) int {
		if gs[a].mine != gs[b].mine {
			return boolFirst(gs[a].mine)
		}
		if wa, wb := give(gs[a].t.whole, len(gs[a].states)), give(gs[b].t.whole, len(gs[b].states)); wa != wb {
			return wb - wa
		}
		return gs[b].cap - gs[a].cap
	})
	sum, room := p.newTally(), 0
	for n, i := range byWhole {
		sum.add(gs[i].t)
		room += gs[i].cap
		if reaches(sum, room) {
			return byWhole[:n+1]
		}
	}
	return byWhole
}

// takeCores takes need units from the cores of the chosen groups, in the
// groups' order: the whole cores the figures allow (the largest first),
// then partly used cores, and takes from the whole cores only what the
// partly used ones cannot give.
func (p *planner) takeCores(gs []group, chosen []int, cores, whole, need int) pick {
	takeWhole, takePart := p.chooseCores(gs, chosen, cores, whole, need)
	amounts := p.shares(gs, takeWhole, takePart, need)
	var pk pick
	sc := p.s
	pk.cpus, pk.reserved = sc.ints(need * p.tpc)[:0], sc.ints(need * p.tpc)[:0]
	pk.sockets = sc.ints(len(gs))[:0]
	seen := groupSet(sc.bools(len(gs))[:0])
	for i, k := range amounts {
		r := chosenAt(takeWhole, takePart, i)
		s := coreAt(gs, r)
		switch p.mode {
		case modeHideSiblings:
			pk.cpus = append(pk.cpus, s.free[0])
			pk.reserved = append(pk.reserved, s.free[1:]...)
		case modeFullCores:
			pk.cpus = append(pk.cpus, s.free...)
		default:
			pk.cpus = append(pk.cpus, s.free[:k]...)
		}
		pk.cores++
		if s.whole {
			pk.whole++
		}
		pk.l3Groups += seen.add(r >> 16)
		if g := gs[r>>16]; !slices.Contains(pk.sockets, g.socket) {
			pk.sockets = append(pk.sockets, g.socket)
		}
	}
	return pk
}

// A core of the pool is referred to by its group and its position in it:
// a group holds far fewer than 1<<16 cores.
func coreRef(group, i int) int             { return group<<16 | i }
func coreAt(gs []group, ref int) coreState { return gs[ref>>16].states[ref&0xffff] }

// chosenAt is the i-th chosen core: the whole ones, then the partly used.
func chosenAt(whole, part []int, i int) int {
	if i < len(whole) {
		return whole[i]
	}
	return part[i-len(whole)]
}

// chooseCores returns the whole cores to take (the largest first) and the
// partly used ones: a growing container's own first, then the largest,
// traded for smaller ones while they still give need, so that the
// remainder goes to the fullest partly used cores.
func (p *planner) chooseCores(gs []group, chosen []int, cores, whole, need int) (takeWhole, takePart []int) {
	sc := p.s
	sc.whole, sc.partial = sc.whole[:0], sc.partial[:0]
	// Cores that all give as much, none a growing container's, are in
	// order already: the common case, which needs no sort.
	wholeUniform, partUniform := true, true
	wholeUnits, partUnits := 0, 0
	for _, g := range chosen {
		for i, s := range gs[g].states {
			u := p.unitsOf(s)
			switch {
			case u == 0:
			case s.whole || p.mode != modeThreads:
				wholeUniform = wholeUniform && (wholeUnits == 0 || u == wholeUnits)
				wholeUnits = u
				sc.whole = append(sc.whole, coreRef(g, i))
			default:
				partUniform = partUniform && !s.mine && (partUnits == 0 || u == partUnits)
				partUnits = u
				sc.partial = append(sc.partial, coreRef(g, i))
			}
		}
	}
	units := func(ref int) int { return p.unitsOf(coreAt(gs, ref)) }
	if !wholeUniform {
		slices.SortStableFunc(sc.whole, func(a, b int) int { return units(b) - units(a) })
	}
	takeWhole = sc.whole[:min(whole, len(sc.whole))]
	target := need
	for _, r := range takeWhole {
		target -= units(r)
	}
	takePart = sc.partial[:min(cores-len(takeWhole), len(sc.partial))]
	if !partUniform {
		slices.SortStableFunc(sc.partial, func(a, b int) int {
			if ua, ub := units(a), units(b); ua != ub {
				return ub - ua
			}
			return trueFirst(coreAt(gs, a).mine, coreAt(gs, b).mine)
		})
		p.smallerPartlyUsed(gs, takePart, sc.partial[len(takePart):], target)
	}
	return takeWhole, takePart
}

// shares returns what each chosen core gives: all its units, less the
// excess over need, cut from the partly used cores first (the last chosen
// first) and from whole cores only then.
func (p *planner) shares(gs []group, takeWhole, takePart []int, need int) []int {
	sc := p.s
	n := len(takeWhole) + len(takePart)
	sc.amounts = slices.Grow(sc.amounts[:0], n)[:n]
	excess := -need
	for i := range sc.amounts {
		sc.amounts[i] = p.unitsOf(coreAt(gs, chosenAt(takeWhole, takePart, i)))
		excess += sc.amounts[i]
	}
	for i := n - 1; i >= 0 && excess > 0; i-- {
		cut := min(excess, sc.amounts[i]-1)
		sc.amounts[i] -= cut
		excess -= cut
	}
	return sc.amounts
}

// smallerPartlyUsed trades chosen partly used cores for smaller ones (or a
// growing container's own) while the chosen still give target: the
// remainder of a request goes to the fullest partly used cores, and the
// roomier ones stay for larger remainders.
func (p *planner) smallerPartlyUsed(gs []group, chosen, rest []int, target int) {
	units := func(ref int) int { return p.unitsOf(coreAt(gs, ref)) }
	sum := 0
	for _, r := range chosen {
		sum += units(r)
	}
	for i := len(chosen) - 1; i >= 0; i-- {
		for j, r := range rest {
			c := chosen[i]
			better := units(r) < units(c) || (units(r) == units(c) && coreAt(gs, r).mine && !coreAt(gs, c).mine)
			if better && sum-units(c)+units(r) >= target {
				sum += units(r) - units(c)
				chosen[i], rest[j] = r, c
			}
		}
	}
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

// offlineThreads are the offline threads of cpu's core.
func (a *Allocator) offlineThreads(cpu int) []int {
	if cpu < 0 || cpu >= len(a.cores.of) || a.cores.of[cpu] < 0 {
		return nil
	}
	var out []int
	for _, t := range a.cores.threads[a.cores.of[cpu]] {
		if !a.x.online(t) {
			out = append(out, t)
		}
	}
	return out
}

// markOfflineThreads gives each core of the exclusive pools' views its
// offline threads, and tells whether one of them joins another pool when
// it comes online. A hide-hyperthreads container placed on a core whose
// sibling is offline gets that sibling idle when it comes online
// (reserveHiddenSiblings), but only from its own pool: a sibling that
// joins shared or another pool would run that pool's load next to the
// container that asked for the whole core, so such a core is not whole
// for it (hideable).
func (a *Allocator) markOfflineThreads() {
	if len(a.cores.of) == 0 {
		return
	}
	for pool, v := range a.views {
		carved := a.layout.carvedPool(pool, false)
		for i := range v.nodes {
			for j := range v.nodes[i].l3s {
				cores := v.nodes[i].l3s[j].cores
				for k := range cores {
					c := &cores[k]
					c.offline = a.offlineThreads(c.threads[0])
					for _, t := range c.offline {
						if !carved.Contains(t) {
							c.offlineAway = true
						}
					}
				}
			}
		}
	}
}

// hideable tells whether a hide-hyperthreads container may take the core
// as a whole one, as far as its offline threads go: each joins the pool
// when it comes online (markOfflineThreads) and no container or hold has
// it (an offline CPU stays its owner's).
func (p *planner) hideable(c *coreView) bool {
	if c.offlineAway {
		return false
	}
	for _, t := range c.offline {
		if p.a.busy[t] {
			return false
		}
	}
	return true
}

// groupSet counts distinct L3 groups by their position in the pool.
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

// boolFirst orders two different booleans, true first, for a sort's cmp.
func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}

// trueFirst orders two booleans, true first, for a sort's cmp.
func trueFirst(a, b bool) int {
	if a == b {
		return 0
	}
	return boolFirst(a)
}

// maxSetAsideCores bounds the cores a refusal names (offlineSetAside).
const maxSetAsideCores = 8

// offlineSetAside says which free cores of the view a hide-hyperthreads
// container may not take because of their offline threads (hideable),
// and why: a refusal that only says "0 whole cores free" while the pool's
// CPUs are all free leaves the user guessing. Empty when there is none.
func (a *Allocator) offlineSetAside(view *poolView) string {
	var away, awayThreads, held, heldThreads []int
	for i := range view.nodes {
		for j := range view.nodes[i].l3s {
			for _, c := range view.nodes[i].l3s[j].cores {
				if len(c.offline) == 0 || slices.ContainsFunc(c.threads, func(t int) bool { return a.busy[t] }) {
					continue
				}
				busy := slices.ContainsFunc(c.offline, func(t int) bool { return a.busy[t] })
				switch {
				case c.offlineAway:
					away, awayThreads = append(away, c.threads...), append(awayThreads, c.offline...)
				case busy:
					held, heldThreads = append(held, c.threads...), append(heldThreads, c.offline...)
				}
			}
		}
	}
	out := ""
	if len(away) > 0 {
		out += fmt.Sprintf("; %s set aside: offline %s %s another pool when online", boundedCPUs("CPU", away), boundedCPUs("sibling", awayThreads), plural.Verb(len(awayThreads), "joins", "join"))
	}
	if len(held) > 0 {
		out += fmt.Sprintf("; %s set aside: offline %s %s another container", boundedCPUs("CPU", held), boundedCPUs("sibling", heldThreads), plural.Verb(len(heldThreads), "belongs to", "belong to"))
	}
	return out
}

// boundedCPUs names at most maxSetAsideCores CPUs, and how many more.
func boundedCPUs(what string, cpus []int) string {
	slices.Sort(cpus)
	s := what + "s " + cpuset.New(cpus[:min(len(cpus), maxSetAsideCores)]...).String()
	if len(cpus) == 1 {
		s = what + " " + cpuset.New(cpus...).String()
	}
	if len(cpus) > maxSetAsideCores {
		s += fmt.Sprintf(" and %d more", len(cpus)-maxSetAsideCores)
	}
	return s
}
