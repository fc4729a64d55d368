package dracore

import (
	"fmt"
	"sync"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Pools is what the driver needs from the daemon: the pools as they are now
// and a placement by its rules.
type Pools interface {
	// Layout returns the node's topology and its pools as configured now.
	Layout() (*sysfs.Topology, *allocator.Layout)
	// Synced tells whether Held and Place see every container: the
	// daemon learns which containers run, and where, from the runtime's
	// first Synchronize. Before it, the driver prepares nothing and
	// publishes no slice: every CPU would look free.
	Synced() bool
	// Held returns the CPUs of an exclusive pool that containers hold,
	// running or held for their pods.
	Held(pool string) cpuset.CPUSet
	// Place chooses n CPUs of pool on NUMA node numa that no container
	// holds and that are not in exclude, by the placement rules (whole
	// cores, fewest L3 groups, best fit). It changes nothing.
	Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error)
	// Release tells that the claims used by these pods' containers were
	// unprepared: the kubelet does so once the pods' containers ended, so
	// CPUs held for them may go back.
	Release(pods []string)
	// Changed is signalled (not necessarily once per change) when Layout,
	// Held or MemoryOffer may have changed.
	Changed() <-chan struct{}
	// MemoryOffer is what claims may be given of each NUMA node's memory
	// and hugepages (allocator.MemoryOffer): the claims' own reservations
	// are not subtracted, the scheduler counts them.
	MemoryOffer() []numamem.NodeOffer
	// ReserveMemory reserves a claim request's memory until ReleaseMemory,
	// replacing what its key reserved. With check it must fit the nodes
	// as they are now, hugepages read again (allocator.ReserveClaim);
	// without, it is a claim prepared before a restart, counted as it is.
	ReserveMemory(c numamem.ClaimMemory, check bool) (warning string, err error)
	// ReleaseMemory gives back the reservations of these keys.
	ReleaseMemory(keys []string)
	// UnbindMemory tells that the request of key is no longer bound to
	// that container (its pod is no longer among the claim's): if its
	// reservation is still that container's, it is bound to none now, and
	// whole again for the next container. Unknown keys are fine.
	UnbindMemory(key, podUID, container string)
}

// Static is the Pools of a node where no container holds exclusive CPUs
// (the tests, and publishing slices for a node from a fixture). It is safe
// for concurrent use.
type Static struct {
	mu    sync.Mutex
	alloc *allocator.Allocator
	opts  config.Allocation
}

var _ Pools = (*Static)(nil)

// NewStatic builds the pools of cfg on topo.
func NewStatic(topo *sysfs.Topology, cfg *config.Config) (*Static, error) {
	layout, problems := allocator.BuildLayout(topo, cfg)
	if problems.HasErrors() {
		return nil, fmt.Errorf("pools: %w", problems.Errors())
	}
	return &Static{alloc: allocator.New(topo, layout, cfg.PinMemory), opts: cfg.Allocation}, nil
}

// StaticOf is the Static over an allocator as it is (the tests: one
// that already holds CPUs or memory).
func StaticOf(alloc *allocator.Allocator, opts config.Allocation) *Static {
	return &Static{alloc: alloc, opts: opts}
}

// Allocator is the allocator under the pools, for tests that look into
// it or place containers on it.
func (s *Static) Allocator() *allocator.Allocator { return s.alloc }

// Layout implements Pools.
func (s *Static) Layout() (*sysfs.Topology, *allocator.Layout) {
	return s.alloc.Topology(), s.alloc.Layout()
}

// Synced implements Pools: there are no containers to learn about.
func (s *Static) Synced() bool { return true }

// Held implements Pools: nothing is held.
func (s *Static) Held(string) cpuset.CPUSet { return cpuset.New() }

// Place implements Pools.
func (s *Static) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return PlaceOn(s.alloc, s.opts, pool, numa, n, exclude)
}

// Release implements Pools: nothing is held.
func (s *Static) Release([]string) {}

// Changed implements Pools: the pools never change.
func (s *Static) Changed() <-chan struct{} { return nil }

// MemoryOffer implements Pools: the nodes' memory as discovered, less the
// reserve.
func (s *Static) MemoryOffer() []numamem.NodeOffer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.alloc.MemoryOffer()
}

// ReserveMemory implements Pools, over the hugepage counts discovered.
func (s *Static) ReserveMemory(c numamem.ClaimMemory, check bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.alloc.ReserveClaim(c, nil, check)
}

// ReleaseMemory implements Pools.
func (s *Static) ReleaseMemory(keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alloc.ReleaseClaims(keys)
}

// UnbindMemory implements Pools.
func (s *Static) UnbindMemory(key, podUID, container string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.alloc.ClaimReservations()[key]; ok && c.PodUID == podUID && c.Container == container {
		s.alloc.BindClaim(key, "", "")
	}
}

// PlaceOn places n CPUs of pool on NUMA node numa with alloc, over the CPUs
// that alloc sees free minus exclude, by the placement rules. Every slot is
// one CPU, so placement options that take more CPUs than asked
// (hideHyperthreads) or refuse some counts (fullPCPUsOnly) do not apply:
// the scheduler counted n CPUs, and n CPUs are given, as on the device
// plugin route.
func PlaceOn(alloc *allocator.Allocator, opts config.Allocation, pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	if !pools.IsExclusive(pool) {
		return cpuset.New(), fmt.Errorf("pool %s is not an exclusive pool", pool)
	}
	topo := alloc.Topology()
	onNode := topo.CPUsWhere(func(c sysfs.CPU) bool { return c.NUMA == numa })
	free := alloc.AvailableCPUs(pool).Intersection(onNode)
	available := free.Difference(exclude)
	if available.Size() < n {
		return cpuset.New(), fmt.Errorf("pool %s has %d free CPUs on NUMA node %s (%q), fewer than the %d the scheduler allocated; other claims hold %q and containers %q",
			pool, available.Size(), NUMAName(numa), available.String(), n,
			exclude.Intersection(onNode).Intersection(alloc.Layout().Pool(pool)).String(),
			alloc.Layout().Pool(pool).Intersection(onNode).Difference(free).String())
	}
	return alloc.Preferred(pool, available, cpuset.New(), n, opts)
}

// NUMAName names a NUMA node in messages: its number, "(none)" for CPUs
// on no node.
func NUMAName(numa int) string {
	if numa == sysfs.Unknown {
		return "(none)"
	}
	return fmt.Sprint(numa)
}
