package allocator

// The operations that decide: a new allocator (New), a container placed
// (Allocate) and committed to the books (commit), a container released
// (Release). They sit on top of the allocator's other files: each of them
// uses the ones below it, and nothing below calls back up.

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// New returns an allocator with no containers.
func New(topo *sysfs.Topology, layout *Layout, pinMemory bool) *Allocator {
	x := newIndex(topo)
	a := &Allocator{
		x:          x,
		layout:     layout,
		pinMemory:  pinMemory,
		views:      map[string]*poolView{pools.Exclusive: x.view(layout.Exclusive), pools.ExclusiveNonIsolcpus: x.view(layout.ExclusiveNonIsolcpus)},
		containers: map[string]*Assignment{},
		inPool:     map[string]int{},
		exclusive:  map[string]*Assignment{},
		byPod:      map[string]map[string]bool{},
		owner:      make([]string, len(x.cpus)),
		busy:       make([]bool, len(x.cpus)),
		holds:      map[string]*Hold{},
	}
	a.mem = numamem.New(topo, x.memNode, layout.MemoryReserve, layout.HugePagesReserve, claimOwners{a})
	a.cores = newPresentCores(topo, x)
	a.markOfflineThreads()
	a.indexPools()
	return a
}

// Allocate places a new container. A container that is already known keeps
// its assignment (the runtime may repeat an event after a reconnect).
func (a *Allocator) Allocate(req Request) (Result, error) {
	if req.ID == "" {
		return Result{}, fmt.Errorf("container has no id")
	}
	if cur, ok := a.containers[req.ID]; ok {
		return Result{Assignment: *cur}, nil
	}
	cachedFit := a.liveCounts(&req)
	infraBefore := a.markInfra()
	warning, onFirst := "", false
	// Reserved is set on every route: by the placement, which makes its
	// own, or empty; not made here only to be replaced on the route of
	// most exclusive creations (issue 45).
	as := &Assignment{ID: req.ID, Pod: req.Pod, Container: req.Container, Pool: req.Pool, MilliCPU: req.MilliCPU, Rule: req.Rule}
	switch req.Pool {
	case pools.Shared, pools.Infra:
		cpus := a.PoolCPUs(req.Pool)
		if cpus.IsEmpty() {
			// No CPU of the pool free (every one offline, or held by
			// exclusive containers kept where they run): where its
			// running members are (a member the kubelet restarts
			// meanwhile must not crash-loop until one is back).
			cpus = a.membersWhileEmpty(req.Pool)
		}
		if cpus.IsEmpty() {
			return Result{}, a.noMembersCPUs(req.Pool)
		}
		as.CPUs, as.Reserved = cpus, cpuset.New()
	case pools.Exclusive, pools.ExclusiveNonIsolcpus:
		as.IsolateIRQs, as.IsolatedPartition, as.PowerClass = req.IsolateIRQs, req.IsolatedPartition, req.PowerClass
		if req.CPUs.Size() > 0 {
			cpus, err := a.placeExact(req)
			if err != nil {
				return Result{}, err
			}
			// Exclusive CPUs whoever chose them: the cpuset bounds the
			// container, and a quota could only throttle it.
			as.CPUs, as.Reserved, as.NoCPUQuota = cpus, cpuset.New(), req.Options.DisableCPUQuota
			if as.Memory, warning, err = a.memoryOnExact(req, cpus); err != nil {
				return Result{}, err
			}
			break
		}
		pl, err := a.placeWithMemory(req, cachedFit)
		if err != nil {
			return Result{}, err
		}
		as.CPUs, as.Reserved, as.Memory, warning, onFirst = pl.cpus, pl.reserved, pl.memory, pl.warning, pl.onFirst
		as.HideHyperthreads = req.Options.HideHyperthreads
	default:
		return Result{}, fmt.Errorf("unknown pool %q", req.Pool)
	}
	as.NoCPUQuota = liftsCPUQuota(req)
	if err := a.withSharedPart(as, req); err != nil {
		return Result{}, err
	}
	as.Mems = a.memsOf(as)
	if onFirst {
		as.Memory = a.onFirstNode(req.Demand, as.Mems)
	}
	if cachedFit != nil && !a.heldStillFits(req, cachedFit, as.Memory) {
		// Nothing is committed yet: decide again on every node's counts.
		return a.Allocate(a.rereadAll(req))
	}
	as.Rule.FromHold = a.takeFromHolds(req, as.Held(), as.Memory)
	res := a.commit(as, infraBefore)
	res.Warning = warning
	return res, nil
}

// liftsCPUQuota is the one rule for the CFS quota, whichever route placed
// the container (an annotation, the kubelet's cpupool.dev/exclusive
// devices, adoption at Synchronize): a container of an exclusive pool owns
// its CPUs, and a quota would throttle it on them (a pod of the resource
// that requests cpu: 10m would get 1% of one CPU), so it is lifted unless
// disableCPUQuota (or its annotation) keeps it. A container with exclusive
// plus shared CPUs has its quota lifted too (see withshared.go). Members of
// shared and infra keep the kubelet's quota.
func liftsCPUQuota(req Request) bool {
	return pools.IsExclusive(req.Pool) && (req.Options.DisableCPUQuota || req.WithShared)
}

// commit records an assignment and computes the updates it causes since
// infra was infraBefore.
func (a *Allocator) commit(as *Assignment, infraBefore infraMark) Result {
	a.addContainer(as)
	if pools.IsExclusive(as.Pool) {
		a.mem.Set(as.ID, as.Memory)
		for _, id := range as.Held().UnsortedList() {
			// A container kept where it runs (keep) may overlap
			// another; the first holder keeps the CPU (see Release).
			switch a.owner[id] {
			case "":
				a.setOwner(id, as.ID)
			case as.ID:
			default:
				a.overlapped = true
			}
		}
	}
	res := Result{Assignment: *as}
	res.Updates, res.InfraChanged = a.followInfra(infraBefore)
	return res
}
