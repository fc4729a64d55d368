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
// for Discover. An absent CPU joins a present group only when the present
// CPUs its list names are all in that one group (the list may lack some:
// the kernel leaves offline CPUs out of it, as they were when it was
// remembered). Absent CPUs whose lists name each other share a group, but
// never so that two present groups become one: a stale entry naming an
// absent CPU of another cache would otherwise bridge two groups the kernel
// keeps apart. Absent CPUs joined to no present group form their own.
func groupCaches(cpus []CPU, absent cpuset.CPUSet, shared func(*CPU) cpuset.CPUSet, set func(*CPU, int)) {
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
	has := map[int]bool{}
	for i := range cpus {
		if !shared(&cpus[i]).IsEmpty() {
			has[cpus[i].ID] = true
		}
	}
	// holds[root] is set when the root's group holds present CPUs: two
	// such groups are two caches of the kernel and are never joined.
	holds := map[int]bool{}
	join := func(x, o int) {
		a, b := find(x), find(o)
		if a == b || holds[a] && holds[b] {
			return
		}
		r := min(a, b)
		parent[max(a, b)] = r
		holds[r] = holds[a] || holds[b]
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
		first[k], parent[id], holds[id] = id, id, true
	}
	// Then each absent CPU into the one present group its list names, if
	// any, before the absent CPUs join each other: which present group an
	// absent CPU sits in is its own list's, not its absent neighbours'.
	for i := range cpus {
		if !absent.Contains(cpus[i].ID) {
			continue
		}
		group, one := Unknown, true
		for _, o := range shared(&cpus[i]).List() {
			if !has[o] || absent.Contains(o) {
				continue
			}
			if r := find(o); group == Unknown {
				group = r
			} else if r != group {
				one = false
			}
		}
		if group != Unknown && one {
			join(cpus[i].ID, group)
		}
	}
	for i := range cpus {
		if !absent.Contains(cpus[i].ID) {
			continue
		}
		for _, o := range shared(&cpus[i]).List() {
			if has[o] && absent.Contains(o) {
				join(cpus[i].ID, o)
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
