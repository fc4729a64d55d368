package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/numamem"
)

// claimPages is what a claim request reserves: n 2 MiB pages on node 1.
func claimPages(key string, n int64) numamem.ClaimMemory {
	return numamem.ClaimMemory{Key: key, Held: []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: n}}}}}
}

// onNode1 is node 1's 2 MiB pages held, 0 when nothing is held there.
func onNode1(t *testing.T, a *Allocator) int64 {
	t.Helper()
	for _, u := range a.MemoryUse() {
		if u.Node == 1 {
			require.GreaterOrEqual(t, u.HugePages[kb2M], int64(0))
			return u.HugePages[kb2M]
		}
	}
	return 0
}

// claimContainer is the container bound to a claim: its CPU on node 1, as
// the claim's, asking n pages.
func claimContainer(t *testing.T, id string, n int64) Request {
	t.Helper()
	r := withMemory(id, 1, 0, numamem.Pages{SizeKB: kb2M, Count: n})
	r.Pod.UID, r.Pod.Name = "uid-claimed", "pod-claimed"
	r.CPUs = set(t, "2")
	return r
}

// A claim's reservation and its container are counted once: as the larger
// of the two, through the container's runs and holds, until the claim is
// released; never negative. Another container gets only what is left.
func TestClaimReservationCountedOnceWithItsContainer(t *testing.T) {
	for _, ask := range []int64{8, 16, 24} {
		a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
		_, err := a.ReserveClaim(claimPages("claim/cpus", 16), nil, true)
		require.NoError(t, err)
		assert.Equal(t, int64(16), onNode1(t, a))
		a.BindClaim("claim/cpus", "uid-claimed", "c")
		assert.Equal(t, int64(16), onNode1(t, a), "binding moves nothing")

		_, err = a.Allocate(claimContainer(t, "run1", ask))
		require.NoError(t, err, "ask %d", ask)
		want := max(ask, 16)
		assert.Equal(t, want, onNode1(t, a), "ask %d: counted once", ask)

		// Another container gets what is left, not a page more.
		other := withMemory("other", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 32 - want + 1})
		other.CPUs = set(t, "3")
		_, err = a.Allocate(other)
		require.ErrorContains(t, err, "hugepages-2Mi", "ask %d", ask)

		failed := int32(1)
		a.Stop("run1", &failed)
		assert.Equal(t, want, onNode1(t, a), "held while stopped")
		_, err = a.Allocate(claimContainer(t, "run2", ask))
		require.NoError(t, err, "the next run")
		assert.Equal(t, want, onNode1(t, a))

		a.Release("run2")
		a.ReleasePod("uid-claimed")
		assert.Equal(t, int64(16), onNode1(t, a), "the container ended: the reservation is whole")
		a.ReleaseClaims([]string{"claim/cpus"})
		assert.Equal(t, int64(0), onNode1(t, a))
		assert.Empty(t, a.MemoryUse())
	}
}

// At a restart the reservations are counted first, then the holds the
// state file remembers: a hold of the claim's container is its claim's.
func TestClaimReservationAndARestoredHold(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	c := claimPages("claim/cpus", 16)
	c.PodUID, c.Container = "uid-claimed", "c"
	_, err := a.ReserveClaim(c, nil, false)
	require.NoError(t, err)
	res, err := a.Allocate(claimContainer(t, "run1", 16))
	require.NoError(t, err)
	failed := int32(1)
	a.Stop("run1", &failed)
	hold := a.Holds()[0]
	require.Equal(t, res.Assignment.Memory, hold.Memory)

	b := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	_, err = b.ReserveClaim(c, nil, false)
	require.NoError(t, err)
	_, err = b.RestoreHold(hold)
	require.NoError(t, err)
	assert.Equal(t, int64(16), onNode1(t, b), "once")
	b.ReleasePod("uid-claimed")
	assert.Equal(t, int64(16), onNode1(t, b))
}

// A reservation checked against the nodes is refused when the pages are
// not there, and the key keeps what it reserved before.
func TestClaimReservationRefused(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	_, err := a.ReserveClaim(claimPages("k", 20), nil, true)
	require.NoError(t, err)
	_, err = a.ReserveClaim(claimPages("other", 20), nil, true)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 20, free node1 12")
	_, err = a.ReserveClaim(claimPages("k", 40), nil, true)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 40, free node1 32", "its own pages count as free to it")
	assert.Equal(t, int64(20), onNode1(t, a), "kept")
	offer := a.MemoryOffer()
	require.Len(t, offer, 2)
	assert.Equal(t, []numamem.Pages{{SizeKB: kb2M, Count: 32}, {SizeKB: kb1G, Count: 0}}, offer[1].HugePages, "the scheduler counts the reservations itself")
}
