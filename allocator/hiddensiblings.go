package allocator

import (
	"maps"
	"slices"

	"k8s.io/utils/cpuset"
)

// ReserveHiddenSiblings gives each container and hold that asked for idle
// siblings (hide-hyperthreads) the other threads of its cores that are
// free now, and returns the containers and holds whose Reserved grew.
//
// A core whose sibling is offline counts as whole, so a hide-hyperthreads
// container placed there has no sibling to hold idle; when the sibling
// comes online (Rebase, or a restart that finds it online) it would join
// its pool free, and be handed to the next container first, as the lone
// thread of a half-used core. A sibling another container or hold has
// stays its own: nothing that runs moves. Only online CPUs of the
// container's pool are taken, in id order of the containers, then of the
// holds. Infra's members follow infra, which a sibling lent from it
// leaves (exclusive-non-isolcpus).
func (a *Allocator) ReserveHiddenSiblings() []Assignment {
	infraBefore := a.markInfra()
	grown := a.reserveHiddenSiblings()
	a.followInfra(infraBefore)
	return grown
}

// reserveHiddenSiblings is ReserveHiddenSiblings for Rebase, which moves
// infra's members itself and reports them.
func (a *Allocator) reserveHiddenSiblings() []Assignment {
	var grown []Assignment
	reserve := func(as *Assignment) bool {
		if !as.HideHyperthreads {
			return false
		}
		pool := a.keepable(as.Pool)
		var more []int
		for _, t := range a.hiddenSiblings(as.CPUs).UnsortedList() {
			if !as.Reserved.Contains(t) && a.owner[t] == "" && pool.Contains(t) {
				more = append(more, t)
			}
		}
		if len(more) == 0 {
			return false
		}
		for _, t := range more {
			a.setOwner(t, as.ID)
		}
		as.Reserved = as.Reserved.Union(cpuset.New(more...))
		return true
	}
	for _, id := range slices.Sorted(maps.Keys(a.exclusive)) {
		if c := a.exclusive[id]; reserve(c) {
			grown = append(grown, *c)
		}
	}
	for _, key := range a.sortedHoldKeys() {
		if h := a.holds[key]; reserve(&h.Assignment) {
			grown = append(grown, h.Assignment)
		}
	}
	return grown
}

// OfflineHiddenSiblings are the offline threads of the cores of a
// hide-hyperthreads container or hold that it holds idle once they come
// online (reserveHiddenSiblings): those that join its pool then, as the
// config in force carves the present CPUs, and that no one else has. A
// reload while they are offline must not give them another pool, as it
// may not while they are online and in Reserved. An offline thread that
// joins another pool, or that another container has, is never its: a
// reload cannot take from it what it would not get.
func (a *Allocator) OfflineHiddenSiblings(as *Assignment) cpuset.CPUSet {
	if !as.HideHyperthreads || len(a.cores.of) == 0 {
		return cpuset.New()
	}
	pool := a.layout.carvedPool(as.Pool, true)
	var out []int
	for _, id := range as.CPUs.UnsortedList() {
		for _, t := range a.offlineThreads(id) {
			if !as.CPUs.Contains(t) && pool.Contains(t) && (a.owner[t] == "" || a.owner[t] == as.ID) {
				out = append(out, t)
			}
		}
	}
	return cpuset.New(out...)
}
