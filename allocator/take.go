package allocator

import (
	"slices"
)

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

// boolFirst orders two different booleans, true first, for a sort's cmp.
func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}
