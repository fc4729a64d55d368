package allocator

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/plural"
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
