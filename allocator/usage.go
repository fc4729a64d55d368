package allocator

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// PoolUsage is one pool's size and use at one moment, as the metrics and
// the simulator report it. It holds counts only, so that it is cheap
// enough to take after every decision; PoolCPUs, AvailableCPUs and Holds
// give the sets.
type PoolUsage struct {
	Pool string
	// CPUs is the size of the pool's current cpuset (see PoolCPUs).
	CPUs int
	// Free is, for exclusive pools, how many CPUs a new container could be
	// given now (see AvailableCPUs); 0 for the others.
	Free int
	// Held is, for exclusive pools, how many CPUs are held for stopped
	// containers until their pod's sandbox stops (see Hold); 0 for the
	// others.
	Held int
	// Containers counts the containers assigned to the pool.
	Containers int
}

// Exclusive tells whether the pool hands out CPUs to one container, so
// that Free and Held are meaningful.
func (u PoolUsage) Exclusive() bool { return pools.IsExclusive(u.Pool) }

// indexPools lists each pool's static CPUs for counting, and marks
// infra's and the shared pool's, whose users follow their owner changes.
func (a *Allocator) indexPools() {
	a.members = map[string][]int{}
	for _, pool := range pools.Names() {
		a.members[pool] = a.layout.Pool(pool).List()
	}
	a.inInfra = make([]bool, len(a.owner))
	for _, id := range a.members[pools.Infra] {
		a.inInfra[id] = true
	}
	a.inShared = make([]bool, len(a.owner))
	for _, id := range a.members[pools.Shared] {
		a.inShared[id] = true
	}
}

// available is the one rule for which CPUs of an exclusive pool a new
// container could be given: nobody holds the CPU, and
// exclusive-non-isolcpus lends only CPUs still in infra's spare room.
func (a *Allocator) available(pool string, cpu int) bool {
	if a.owner[cpu] != "" {
		return false
	}
	return pool != pools.ExclusiveNonIsolcpus || a.inInfra[cpu]
}

// keepable are the CPUs a running container of an exclusive pool may keep
// as its pool's: the pool's, and for exclusive-non-isolcpus also infra's
// isolated CPUs, which releases before review 59 lent. It is lent no new
// one, but one lent stays lent until it is released, as nothing running
// moves: neither a restart (an upgrade) nor a reload with the same pools
// is refused for it.
func (a *Allocator) keepable(pool string) cpuset.CPUSet {
	if pool != pools.ExclusiveNonIsolcpus || !a.layout.LendsNonIsolcpus {
		return a.layout.Pool(pool)
	}
	return a.layout.ExclusiveNonIsolcpus.Union(a.layout.Infra.Intersection(a.layout.Isolated).Difference(a.layout.Reserved))
}

// AvailableCPUs returns the CPUs of an exclusive pool that a new container
// could be given now.
func (a *Allocator) AvailableCPUs(pool string) cpuset.CPUSet {
	var ids []int
	for _, id := range a.members[pool] {
		if a.available(pool, id) {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...)
}

// Usage returns every pool's usage, in pools.Names order.
func (a *Allocator) Usage() []PoolUsage {
	out := make([]PoolUsage, 0, len(a.members))
	index := map[string]int{}
	for _, pool := range pools.Names() {
		u := PoolUsage{Pool: pool}
		for _, id := range a.members[pool] {
			switch {
			case u.Exclusive():
				u.CPUs++
				if a.available(pool, id) {
					u.Free++
				}
			case a.owner[id] == "": // see PoolCPUs
				u.CPUs++
			}
		}
		index[pool] = len(out)
		out = append(out, u)
	}
	for pool, n := range a.inPool {
		if i, ok := index[pool]; ok {
			out[i].Containers = n
		}
	}
	if len(a.holds) > 0 {
		// Distinct CPUs: holds of one pod may overlap after keep (recover.go).
		seen := make([]bool, len(a.owner))
		for _, h := range a.holds {
			i, ok := index[h.Pool]
			if !ok {
				continue
			}
			for _, cpu := range h.Held().UnsortedList() {
				if cpu >= 0 && cpu < len(seen) && !seen[cpu] {
					seen[cpu] = true
					out[i].Held++
				}
			}
		}
	}
	return out
}
