package sysfs

import "k8s.io/utils/cpuset"

// groupCaches numbers the groups of CPUs sharing one cache level (shared
// is a CPU's list of that cache) in order of their lowest CPU and gives
// each CPU its group's index (set); a CPU without a list (offline: the
// kernel removes its cache directories) gets none. Discover and
// WithRemembered both number with it, so a node whose record puts no CPU
// back is carved exactly as Discover read it.
//
// The present CPUs' groups are the kernel's: present CPUs share a group
// when the kernel gives them the same list. absent are CPUs the kernel no
// longer has, put back from their remembered lists (perhaps stale); none
// for Discover. An absent CPU that joined a present core (coreMates: the
// core's present threads, by absent CPU; ownCores decides) takes that
// core's group, whatever its list says: a core lies in one group of each
// cache, as Discover reads every node, and the siblings entry that put the
// CPU in the core is the stronger word (a stale cache entry beside it
// would otherwise split the core over two groups, and the pools carved on
// it would move present CPUs). Such a CPU's list then links it to other
// absent CPUs (below) only when it names present CPUs of its core's group
// alone: one naming another group, or no present CPU, is as stale as the
// core says, and moves no other CPU. Each other absent CPU is placed by
// what its own list says:
//   - it joins a present group when the present CPUs its list names are
//     all in that one group (the list may lack some: the kernel leaves
//     offline CPUs out of it, as they were when it was remembered);
//   - a list naming present CPUs of two groups or more is stale (another
//     shape of the machine): the CPU gets a group of its own and joins no
//     other absent CPU, nor is joined by one, since its place is unknown;
//   - a list naming no present CPU (its whole cache removed, or its
//     present neighbours offline when it was remembered) joins it with the
//     other such absent CPUs its list names, or that name it. One naming
//     the other is enough: the daemon remembers the online CPUs again after
//     each removal, so a CPU removed early lists the ones removed later,
//     which no longer list it. Such a group then joins the present group
//     of the absent CPUs joined to one that it names or that name it, when
//     that is one present group; when it is none or two or more, it stays a
//     group of its own: it must not make two present groups one, nor sit in
//     one of them by the order it is met in.
func groupCaches(cpus []CPU, absent cpuset.CPUSet, coreMates map[int]cpuset.CPUSet, shared func(*CPU) cpuset.CPUSet, set func(*CPU, int)) {
	parent := map[int]int{}
	var find func(int) int
	find = func(x int) int {
		if p, ok := parent[x]; ok && p != x {
			parent[x] = find(p)
			return parent[x]
		}
		parent[x] = x
		return x
	}
	join := func(x, o int) {
		if a, b := find(x), find(o); a != b {
			parent[max(a, b)] = min(a, b)
		}
	}
	has := map[int]bool{}
	for i := range cpus {
		if !shared(&cpus[i]).IsEmpty() {
			has[cpus[i].ID] = true
		}
	}
	// The kernel's groups first: the present CPUs with one list, rooted at
	// the lowest of them (cpus are sorted by ID).
	first := map[string]int{}
	for i := range cpus {
		id := cpus[i].ID
		if absent.Contains(id) || !has[id] {
			continue
		}
		k := shared(&cpus[i]).String()
		if f, ok := first[k]; ok {
			parent[id] = f
			continue
		}
		first[k], parent[id] = id, id
	}
	// Then each absent CPU of a present core into that core's group (the
	// lowest present thread with a list: an offline one has none), and
	// each other one by the present CPUs its list names: into their group
	// (joined), none (loose), or stale.
	const (
		loose = iota
		joined
		stale
		// overridden is an absent CPU its core placed against its own
		// list (one naming no present group, or another group than the
		// core's): the list is stale and, as a stale one, links it to
		// no other absent CPU.
		overridden
	)
	kind := map[int]int{}
	presentGroups := func(c *CPU) map[int]bool {
		groups := map[int]bool{}
		for _, o := range shared(c).List() {
			if has[o] && !absent.Contains(o) {
				groups[find(o)] = true
			}
		}
		return groups
	}
	for i := range cpus {
		id := cpus[i].ID
		if !absent.Contains(id) {
			continue
		}
		if mate, ok := firstWith(coreMates[id], has); ok {
			core := find(mate)
			groups := presentGroups(&cpus[i])
			has[id] = true
			join(id, core)
			kind[id] = overridden
			if len(groups) == 1 && groups[core] {
				kind[id] = joined
			}
			continue
		}
		if !has[id] {
			continue
		}
		groups := presentGroups(&cpus[i])
		switch len(groups) {
		case 0:
			kind[id] = loose
		case 1:
			for g := range groups {
				join(id, g)
			}
			kind[id] = joined
		default:
			kind[id] = stale
		}
	}
	// The loose CPUs naming each other (either way) are one group; each
	// such group notes the present groups of the joined CPUs linked to it.
	links := func(do func(a, b int)) {
		for i := range cpus {
			id := cpus[i].ID
			if !absent.Contains(id) || !has[id] || kind[id] == stale || kind[id] == overridden {
				continue
			}
			for _, o := range shared(&cpus[i]).List() {
				if o != id && has[o] && absent.Contains(o) && kind[o] != stale && kind[o] != overridden {
					do(id, o)
				}
			}
		}
	}
	links(func(a, b int) {
		if kind[a] == loose && kind[b] == loose {
			join(a, b)
		}
	})
	reach := map[int]map[int]bool{} // a loose group's root: the present groups linked to it
	links(func(a, b int) {
		if kind[a] == kind[b] {
			return
		}
		if kind[a] == joined {
			a, b = b, a
		}
		r := find(a)
		if reach[r] == nil {
			reach[r] = map[int]bool{}
		}
		reach[r][find(b)] = true
	})
	for r, groups := range reach {
		if len(groups) == 1 {
			for g := range groups {
				join(r, g)
			}
		}
	}
	index := map[int]int{}
	for i := range cpus { // sorted by ID: a group is numbered at its lowest CPU
		if !has[cpus[i].ID] {
			continue
		}
		r := find(cpus[i].ID)
		v, ok := index[r]
		if !ok {
			v = len(index)
			index[r] = v
		}
		set(&cpus[i], v)
	}
}

// firstWith is the lowest CPU of set for which has is true.
func firstWith(set cpuset.CPUSet, has map[int]bool) (int, bool) {
	for _, c := range set.List() {
		if has[c] {
			return c, true
		}
	}
	return 0, false
}
