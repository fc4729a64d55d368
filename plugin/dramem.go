package plugin

// The memory of DRA claims (docs/dra.md, "Memory and hugepages"): the
// driver reserves what the scheduler allocated of a NUMA node's memory and
// hugepages from Prepare to Unprepare, in the allocator's per-node
// accounting, where no other container can take it. The plugin keeps the
// reservations too, because Synchronize builds a new allocator: they are
// counted again before any container is.

import (
	"maps"
	"slices"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// MemoryOffer implements dra.Pools.
func (p *Plugin) MemoryOffer() []numamem.NodeOffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alloc.MemoryOffer()
}

// ReserveMemory implements dra.Pools: with check, the hugepage counts are
// read again, as a decision reads them, so that pages taken by something
// the plugin does not know are not given to the claim.
func (p *Plugin) ReserveMemory(c numamem.ClaimMemory, check bool) (string, error) {
	now := p.hugePagesNowFor(numamem.DemandOf(c.Held), check)
	p.mu.Lock()
	defer p.mu.Unlock()
	warning, err := p.alloc.ReserveClaim(c, now, check)
	if err != nil {
		return "", err
	}
	if p.claimMemory == nil {
		p.claimMemory = map[string]numamem.ClaimMemory{}
	}
	p.claimMemory[c.Key] = p.alloc.ClaimReservations()[c.Key]
	p.publishUsage()
	return warning, nil
}

// hugePagesNowFor is hugePagesNow for a reservation that is checked. The
// driver calls it on its own goroutine, before the lock (the counts are
// read outside it): the topology, which a CPU hotplug replaces under the
// lock (applyHotplug), is taken under a short one.
func (p *Plugin) hugePagesNowFor(d numamem.Demand, check bool) map[int][]sysfs.HugePages {
	if !check || len(d.HugePages) == 0 {
		return nil
	}
	p.mu.Lock()
	topo := p.topo
	p.mu.Unlock()
	return p.hugePagesNow(topo, d)
}

// ReleaseMemory implements dra.Pools.
func (p *Plugin) ReleaseMemory(keys []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.alloc.ReleaseClaims(keys)
	for _, key := range keys {
		delete(p.claimMemory, key)
	}
	p.publishUsage()
}

// UnbindMemory implements dra.Pools: a request the driver kept with its
// CPUs for a claim's new pod no longer belongs to the container of the
// pod it was bound to. Its reservation, counted bound to that container
// (at the driver's start, from the claims file; or lent to it since), is
// bound to none, in the allocator and in the plugin's copy that every new
// allocator counts again: a stale owner would have the reservation count
// only what that container (or the hold of its last run) does not hold,
// and would get it back when a creation of the new pod's container is
// refused (detachClaims). Bound meanwhile to another container (the new
// pod's), it stays with it.
func (p *Plugin) UnbindMemory(key, podUID, container string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.claimMemory[key]
	if !ok || c.PodUID != podUID || c.Container != container {
		return
	}
	p.alloc.BindClaim(key, "", "")
	c.PodUID, c.Container = "", ""
	p.claimMemory[key] = c
	p.publishUsage()
}

// bindClaimMemory tells the allocator that the container showed these
// requests' tokens: its memory is taken from their reservations first, so
// it is not counted twice. It returns the owners of those whose owner it
// changed, as they were (detachClaims gives them back).
func (p *Plugin) bindClaimMemory(keys []string, podUID, container string) []claimOwner {
	var before []claimOwner
	for _, key := range keys {
		c, ok := p.claimMemory[key]
		if !ok || (c.PodUID == podUID && c.Container == container) {
			continue
		}
		before = append(before, claimOwner{key: key, podUID: c.PodUID, container: c.Container})
		p.alloc.BindClaim(key, podUID, container)
		c.PodUID, c.Container = podUID, container
		p.claimMemory[key] = c
	}
	return before
}

// claimOwner is the container a claim request's memory reservation was
// bound to (none: empty).
type claimOwner struct{ key, podUID, container string }

// recountClaimMemory counts the reservations in a new allocator, before
// any container: a container bound to one then takes from it.
func (p *Plugin) recountClaimMemory() {
	for _, key := range slices.Sorted(maps.Keys(p.claimMemory)) {
		if _, err := p.alloc.ReserveClaim(p.claimMemory[key], nil, false); err != nil {
			p.log.Warnf("DRA: reservation %s: %v", key, err) // unchecked: never
		}
	}
}
