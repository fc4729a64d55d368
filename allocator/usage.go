package allocator

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// PoolUsage is one pool's size and use at one moment, as the metrics and
// the simulator report it.
type PoolUsage struct {
	Pool string
	// CPUs is the pool's current cpuset (see PoolCPUs).
	CPUs cpuset.CPUSet
	// Free is set for exclusive pools only: the CPUs a new container could
	// be given now (see AvailableCPUs).
	Free cpuset.CPUSet
	// Held is set for exclusive pools only: the CPUs held for stopped
	// containers until their pod's sandbox stops (see Hold).
	Held cpuset.CPUSet
	// Containers counts the containers assigned to the pool.
	Containers int
}

// Exclusive tells whether the pool hands out CPUs to one container, so
// that Free is meaningful.
func (u PoolUsage) Exclusive() bool { return pools.IsExclusive(u.Pool) }

// AvailableCPUs returns the CPUs of an exclusive pool that a new container
// could be given now: free ones, and for exclusive-non-isolcpus only those
// still in infra's spare room, since that pool lends infra's CPUs.
func (a *Allocator) AvailableCPUs(pool string) cpuset.CPUSet {
	free := a.FreeCPUs(pool)
	if pool == pools.ExclusiveNonIsolcpus {
		free = free.Intersection(a.PoolCPUs(pools.Infra))
	}
	return free
}

// Usage returns every pool's usage, in pools.Names() order.
func (a *Allocator) Usage() []PoolUsage {
	members, held := map[string]int{}, map[string][]int{}
	for _, c := range a.containers {
		members[c.Pool]++
	}
	for _, h := range a.holds {
		held[h.Pool] = append(held[h.Pool], h.Held().UnsortedList()...)
	}
	out := make([]PoolUsage, 0, len(pools.Names()))
	for _, pool := range pools.Names() {
		u := PoolUsage{Pool: pool, CPUs: a.PoolCPUs(pool), Containers: members[pool]}
		if u.Exclusive() {
			u.Free = a.AvailableCPUs(pool)
			u.Held = cpuset.New(held[pool]...)
		}
		out = append(out, u)
	}
	return out
}
