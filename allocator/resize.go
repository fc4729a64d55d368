package allocator

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// Resize changes a running container's CPU request in place (Kubernetes'
// in-place pod resize). An exclusive container grows by CPUs placed by the
// same rules as a new request, as close as they can be to the CPUs it has:
// its own NUMA nodes first, the siblings of its own half cores, its L3
// groups. It shrinks by giving back the CPUs resizes added, the last added
// first and core by core (see returnOrder), and never gives back its
// original set. A shared or infra container only records the new
// request: its cpuset is its pool's. On error nothing changes.
func (a *Allocator) Resize(req Request) (Result, error) {
	c, ok := a.containers[req.ID]
	if !ok {
		return Result{}, fmt.Errorf("container %s is not known", req.ID)
	}
	if !pools.IsExclusive(c.Pool) {
		c.MilliCPU = req.MilliCPU
		return Result{Assignment: *c}, nil
	}
	who := "container " + c.Pod.ContainerName(c.Container)
	n, cur := CPUsFor(req.MilliCPU), c.CPUs.Size()
	switch {
	case n == 0:
		return Result{}, fmt.Errorf("pool %s cannot resize %s to no CPU request: its exclusive size is its CPU request; it keeps CPUs %s", c.Pool, who, c.CPUs)
	case n == cur:
		c.MilliCPU = req.MilliCPU
		return Result{Assignment: *c}, nil
	case n > cur:
		return a.grow(c, req, n)
	}
	return a.shrink(c, req, n)
}

func (a *Allocator) grow(c *Assignment, req Request, n int) (Result, error) {
	g := req
	g.Pool, g.Pod, g.Container = c.Pool, c.Pod, c.Container
	g.MilliCPU = int64(n-c.CPUs.Size()) * 1000
	g.grow = c
	if g.NUMANodes.Size() == 0 {
		g.NUMANodes = cpuset.New()
	}
	if g.PreferNUMA.Size() == 0 {
		g.PreferNUMA = cpuset.New()
	}
	if err := a.wholeCores(c, req, "grow", n); err != nil {
		return Result{}, err
	}
	cpus, reserved, err := a.placeExclusive(g)
	if err != nil {
		return Result{}, fmt.Errorf("%w; it keeps CPUs %s", err, c.CPUs)
	}
	infraBefore := a.markInfra()
	// CPUs held for the pod's stopped containers that the growth reuses
	// leave their holds.
	a.takeFromHolds(g, cpus.Union(reserved), nil)
	for _, id := range cpus.Union(reserved).UnsortedList() {
		a.setOwner(id, c.ID)
	}
	c.CPUs = c.CPUs.Union(cpus)
	c.Reserved = c.Reserved.Union(reserved)
	c.Added = append(slices.Clone(c.Added), a.returnOrder(c, cpus)...)
	c.MilliCPU = req.MilliCPU
	c.Mems = a.resizedMems(c)
	res := Result{Assignment: *c}
	res.Updates, res.InfraChanged = a.followInfra(infraBefore)
	return res, nil
}

// wholeCores refuses to resize (verb: grow or shrink) a full-pcpus-only
// container c to n CPUs that are not whole cores: either way it would hold
// part of a core.
func (a *Allocator) wholeCores(c *Assignment, req Request, verb string, n int) error {
	// hide-hyperthreads wins over full-pcpus-only, as in placement: each
	// CPU is then a whole core with its siblings hidden, any count of them.
	if !req.Options.FullPCPUsOnly || req.Options.HideHyperthreads || a.x.threadsPerCore <= 1 || n%a.x.threadsPerCore == 0 {
		return nil
	}
	return fmt.Errorf("pool %s cannot %s container %s to %d CPUs: full-pcpus-only takes whole cores of %d threads; request a multiple of %d; it keeps CPUs %s",
		c.Pool, verb, c.Pod.ContainerName(c.Container), n, a.x.threadsPerCore, a.x.threadsPerCore, c.CPUs)
}

// partCore returns an online CPU of cpus and an online thread of its core
// that cpus lacks, or nil when cpus are whole cores (offline threads are
// left out: nothing tells whose they were).
func (a *Allocator) partCore(cpus cpuset.CPUSet) []int {
	for _, id := range cpus.List() {
		if !a.x.online(id) || a.x.cpus[id].core < 0 {
			continue
		}
		for _, t := range a.x.cores[a.x.cpus[id].core] {
			if t != id && a.x.online(t) && !cpus.Contains(t) {
				return []int{id, t}
			}
		}
	}
	return nil
}

// returnOrder lists added CPUs in the order a shrink gives them back from
// the end, core by core, so that a shrink by whole cores gives back whole
// cores (sorting by id would not: with siblings N and N+8 the last ids are
// one thread of several cores). First come the cores the grow completed,
// which the container held part of before: giving them back splits a core
// it had whole. Then the cores it added whole. Last the cores it holds only
// in part, so that a shrink by one undoes a half core before it breaks a
// whole one.
func (a *Allocator) returnOrder(c *Assignment, added cpuset.CPUSet) []int {
	type group struct {
		rank int
		ids  []int
	}
	var groups []*group
	byCore := make(map[int]*group)
	for _, id := range added.List() {
		core := -1
		if a.x.present(id) {
			core = a.x.cpus[id].core
		}
		if core < 0 {
			// No known core (offline): a group of its own, keyed
			// apart from every real core.
			core = -1 - id
		}
		g := byCore[core]
		if g == nil {
			g = &group{rank: a.coreRank(c, added, core)}
			byCore[core] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, id)
	}
	// Stable: cores of one rank keep the order of their lowest CPU.
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].rank < groups[j].rank })
	ids := make([]int, 0, added.Size())
	for _, g := range groups {
		ids = append(ids, g.ids...)
	}
	return ids
}

// The ranks of coreRank, in the order a shrink's list holds them: a
// shrink gives back from the end, so the last rank goes back first.
const (
	// completedCore: the grow added the siblings that complete a core the
	// container held part of before.
	completedCore = iota
	// addedWholeCore: the grow added the whole core.
	addedWholeCore
	// partialCore: the container holds the core only in part (or the CPU
	// is offline, with no core known).
	partialCore
)

// coreRank ranks a core of the CPUs resizes added to container c (added),
// for returnOrder and giveBackOrder. A shrink gives back from the end of
// their list, the highest rank first, so that whole cores go back whole
// and no core the container had whole is split while another CPU can go:
// first a core it holds only in part, so that a shrink by one CPU undoes
// a half core before it breaks a whole one; then the cores resizes added
// whole; last the cores a grow completed, whose siblings' giving back
// splits a core the container had whole.
func (a *Allocator) coreRank(c *Assignment, added cpuset.CPUSet, core int) int {
	if core < 0 {
		// An offline CPU the index knows no core of: no siblings known,
		// a part.
		return partialCore
	}
	r := addedWholeCore
	for _, t := range a.x.cores[core] {
		switch {
		case !c.CPUs.Contains(t):
			return partialCore
		case !added.Contains(t):
			r = completedCore
		}
	}
	return r
}

func (a *Allocator) shrink(c *Assignment, req Request, n int) (Result, error) {
	original := c.Original()
	if n < original.Size() {
		return Result{}, fmt.Errorf("pool %s cannot shrink container %s to %d CPUs: a resize never gives back the %d CPUs it was created with (%s); request at least %d CPUs; it keeps CPUs %s",
			c.Pool, c.Pod.ContainerName(c.Container), n, original.Size(), original, original.Size(), c.CPUs)
	}
	if err := a.wholeCores(c, req, "shrink", n); err != nil {
		return Result{}, err
	}
	k := c.CPUs.Size() - n
	order := a.giveBackOrder(c)
	give := cpuset.New(order[len(order)-k:]...)
	infraBefore := a.markInfra()
	c.Added = order[:len(order)-k]
	c.CPUs = c.CPUs.Difference(give)
	// Hidden siblings go back with the last CPU of their core.
	var unhide []int
	for _, id := range c.Reserved.UnsortedList() {
		kept := false
		for _, t := range a.x.cores[a.x.cpus[id].core] {
			kept = kept || c.CPUs.Contains(t)
		}
		if !kept {
			unhide = append(unhide, id)
		}
	}
	c.Reserved = c.Reserved.Difference(cpuset.New(unhide...))
	a.disown(c.ID, give.Union(cpuset.New(unhide...)))
	c.MilliCPU = req.MilliCPU
	c.Mems = a.resizedMems(c)
	res := Result{Assignment: *c}
	res.Updates, res.InfraChanged = a.followInfra(infraBefore)
	return res, nil
}

// giveBackOrder is c.Added regrouped core by core at shrink time, so that
// a shrink gives back whole cores whatever order the record has: a release
// before returnOrder recorded Added by CPU id, one thread of several cores
// last, and a restart loads it as written. Each core's added CPUs sit at
// the position of its first one, which keeps the last added cores last;
// the siblings that completed a core the container was created on go
// first, and the cores it holds only in part last, as in returnOrder. A
// record returnOrder wrote comes out unchanged.
func (a *Allocator) giveBackOrder(c *Assignment) []int {
	added := cpuset.New(c.Added...)
	type group struct {
		rank int
		ids  []int
	}
	var groups []*group
	byCore := make(map[int]*group)
	for _, id := range c.Added {
		core := a.x.cpus[id].core
		g := byCore[core]
		if g == nil || core < 0 {
			g = &group{rank: a.coreRank(c, added, core)}
			byCore[core] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, id)
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].rank < groups[j].rank })
	ids := make([]int, 0, len(c.Added))
	for _, g := range groups {
		ids = append(ids, g.ids...)
	}
	return ids
}

// resizedMems are a resized container's mems: those it runs with, and the
// nodes of its CPUs and memory now. They never narrow: narrowing
// cpuset.mems migrates the pages the container has on the nodes it loses
// (cgroup v2 always, v1 with memory_migrate), and a running container's
// memory is not ours to move, whether the mems are ours from a CPU the
// last grow added or the runtime's, which Synchronize kept.
func (a *Allocator) resizedMems(c *Assignment) cpuset.CPUSet {
	now := a.memsOf(c)
	if c.Mems.IsSubsetOf(now) {
		return now
	}
	return now.Union(c.Mems)
}
