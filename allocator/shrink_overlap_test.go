package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// checkOverlapInvariants is checkInvariants' ownership part for a node
// where keep put two containers on one CPU (checkInvariants refuses any
// CPU held twice): every CPU an exclusive container or a hold has is owned
// by one of them, never free and never by an id that holds it no more, and
// every owned CPU is held by its owner.
func checkOverlapInvariants(t *testing.T, a *Allocator) {
	t.Helper()
	holders := map[int][]string{}
	for _, as := range a.Assignments() {
		if pools.IsExclusive(as.Pool) {
			for _, cpu := range as.Held().List() {
				holders[cpu] = append(holders[cpu], as.ID)
			}
		}
	}
	for _, h := range a.Holds() {
		for _, cpu := range h.Held().List() {
			holders[cpu] = append(holders[cpu], h.ID)
		}
	}
	free := a.FreeCPUs(pools.Exclusive).Union(a.FreeCPUs(pools.ExclusiveNonIsolcpus))
	for cpu, ids := range holders {
		require.Contains(t, ids, a.owner[cpu], "CPU %d is owned by one of its holders %v", cpu, ids)
		require.False(t, free.Contains(cpu), "CPU %d, held by %v, is not free", cpu, ids)
	}
	for cpu, id := range a.owner {
		if id != "" {
			require.Contains(t, holders[cpu], id, "CPU %d's owner %s holds it", cpu, id)
		}
	}
}

// overlapped restores a with CPUs 4-6 (5 and 6 added by a resize) and
// keeps b where it runs, on 6-7: both run on 6, which a, the first
// holder, owns.
func overlappedOnSix(t *testing.T) *Allocator {
	t.Helper()
	a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "2-7,10-15"`)
	first := remembered(t, "a", "4-6", "")
	first.Added = []int{5, 6}
	_, err := a.restore(first)
	require.NoError(t, err)
	_, err = a.keep(remembered(t, "b", "6-7", ""))
	require.ErrorContains(t, err, "already held by container a")
	require.True(t, a.overlapped)
	require.Equal(t, "a", a.owner[6])
	checkOverlapInvariants(t, a)
	return a
}

// A live shrink (in-place resize down) of the first of two containers
// keep put on one CPU gives that CPU to the other, which still runs on
// it: freed, it would be handed to the next container while b runs there;
// kept under a, it would never be free again once both are gone.
func TestShrinkOfTheFirstOverlappedContainerGivesTheSharedCPUToTheOther(t *testing.T) {
	a := overlappedOnSix(t)
	res, err := a.Resize(Request{ID: "a", MilliCPU: 1000})
	require.NoError(t, err)
	assert.Equal(t, "4", res.Assignment.CPUs.String(), "gives back what its resizes added")
	assert.Equal(t, "b", a.owner[6], "6 passes to b, who runs on it")
	assert.Empty(t, a.owner[5], "5 was a's alone: free")
	assert.True(t, a.FreeCPUs(pools.Exclusive).Contains(5))
	assert.False(t, a.FreeCPUs(pools.Exclusive).Contains(6), "b still runs on 6")
	checkOverlapInvariants(t, a)
	checkInvariants(t, a) // no CPU is held twice any more

	_, err = a.Allocate(exclusive("next", 1))
	require.NoError(t, err)
	next, _ := a.Get("next")
	assert.False(t, next.CPUs.Contains(6), "a new container is not placed on b's CPU")
	checkInvariants(t, a)

	a.Release("b")
	assert.True(t, a.FreeCPUs(pools.Exclusive).Contains(6), "6 is free once b is gone (owner %q)", a.owner[6])
	checkInvariants(t, a)
}

// The second holder's shrink gives back a CPU the first still owns and
// runs on: it stays the first's.
func TestShrinkOfTheSecondOverlappedContainerLeavesTheSharedCPUToTheFirst(t *testing.T) {
	a := overlappedOnSix(t)
	b, _ := a.Get("b")
	b.Added = []int{6} // b grew onto 6 before the restart
	_, err := a.keep(b)
	require.Error(t, err)
	res, err := a.Resize(Request{ID: "b", MilliCPU: 1000})
	require.NoError(t, err)
	assert.Equal(t, "7", res.Assignment.CPUs.String())
	assert.Equal(t, "a", a.owner[6], "6 stays a's, who runs on it")
	checkOverlapInvariants(t, a)
	checkInvariants(t, a)

	a.Release("a")
	assert.True(t, cpuset.New(4, 5, 6).IsSubsetOf(a.FreeCPUs(pools.Exclusive)), "a's CPUs free once it is gone")
	checkInvariants(t, a)
}

// A pod's hold that keeps fewer CPUs (takeFromHolds, when the pod's other
// container takes some) lets the idle siblings of the cores it no longer
// has go. One of them another container runs on too (keep): it passes to
// that container, never back to the hold that lets it go, never free
// while the container runs there, and free once it is gone.
func TestHoldLettingAnOverlappedSiblingGoGivesItToTheOtherHolder(t *testing.T) {
	const cfgYAML = `isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
`
	a := offlineUnder(t, cfgYAML)
	h := remembered(t, "init", "4-5", "12-13")
	h.HideHyperthreads = true
	zero := int32(0)
	_, err := a.RestoreHold(Hold{Assignment: h, ExitCode: &zero})
	require.NoError(t, err)
	// Another container kept where it runs, on the hold's idle sibling 12.
	_, err = a.keep(remembered(t, "k", "7,12", ""))
	require.ErrorContains(t, err, "already held by container init")
	require.True(t, a.overlapped)
	require.Equal(t, "init", a.owner[12], "the first holder keeps it")
	checkOverlapInvariants(t, a)

	_, err = a.Allocate(Request{ID: "app", Pod: h.Pod, Container: "app", Pool: pools.Exclusive, MilliCPU: 1000, CPUs: set(t, "4")})
	require.NoError(t, err)
	holds := a.Holds()
	require.Len(t, holds, 1)
	assert.Equal(t, "5", holds[0].CPUs.String())
	assert.Equal(t, "13", holds[0].Reserved.String(), "12 is no longer the hold's")
	assert.Equal(t, "k", a.owner[12], "12 passes to k, who runs on it")
	assert.False(t, a.FreeCPUs(pools.Exclusive).Contains(12), "k still runs on 12")
	checkOverlapInvariants(t, a)
	checkInvariants(t, a)

	a.Release("k")
	assert.True(t, a.FreeCPUs(pools.Exclusive).Contains(12), "12 is free once k is gone (owner %q)", a.owner[12])
	checkInvariants(t, a)
}
