package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// Two containers kept where they run on one CPU (keep after a restart):
// when the first one's pod goes (ReleasePod), the CPU it shared must pass
// to the other, and the CPUs it had alone must be free. free runs while
// the released container is still registered, so otherHolder finds the
// released container itself and the CPUs stay owned by an id that no
// longer exists: never free again, not even once the other is released.
func TestReleasePodOverlappedGivesSharedCPUToTheOtherHolder(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	_, err := a.restore(Assignment{ID: "a", Pod: PodRef{Namespace: "ns", Name: "pa", UID: "uid-a"}, Container: "c",
		Pool: pools.Exclusive, CPUs: set(t, "10,50")})
	require.NoError(t, err)
	_, err = a.keep(Assignment{ID: "b", Pod: PodRef{Namespace: "ns", Name: "pb", UID: "uid-b"}, Container: "c",
		Pool: pools.Exclusive, CPUs: set(t, "50,52")})
	require.ErrorContains(t, err, "already held by container a")

	released, _ := a.ReleasePod("uid-a")
	require.Len(t, released, 1)
	assert.True(t, a.FreeCPUs(pools.Exclusive).Contains(10), "10 was a's alone: free once a's pod is gone (owner %q)", a.owner[10])
	assert.False(t, a.FreeCPUs(pools.Exclusive).Contains(50), "b still runs on 50")
	assert.Equal(t, "b", a.owner[50], "50 passes to b, who runs on it")

	a.Release("b")
	assert.True(t, a.FreeCPUs(pools.Exclusive).Contains(50), "50 free once b is gone too (owner %q)", a.owner[50])
}

// The same rule in a pod's hold that keeps fewer CPUs (takeFromHolds):
// once keep has put two containers on one CPU anywhere on the node
// (overlapped), the idle sibling a hold lets go is looked up among the
// holders while the hold still lists it, so it goes back to the hold
// itself, which then no longer has it: an exclusive CPU no one may be
// given, for as long as the plugin runs.
func TestHoldLettingAnIdleSiblingGoWhileOverlappedFreesIt(t *testing.T) {
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
	// Two other containers kept where they run, on one CPU.
	_, err = a.restore(remembered(t, "k1", "7", ""))
	require.NoError(t, err)
	_, err = a.keep(remembered(t, "k2", "7,15", ""))
	require.ErrorContains(t, err, "already held by container k1")
	require.True(t, a.overlapped)

	_, err = a.Allocate(Request{ID: "app", Pod: h.Pod, Container: "app", Pool: pools.Exclusive, MilliCPU: 1000, CPUs: set(t, "4")})
	require.NoError(t, err)
	holds := a.Holds()
	require.Len(t, holds, 1)
	assert.Equal(t, "13", holds[0].Reserved.String())
	assert.Empty(t, a.owner[12], "no one holds CPU 12 for a core the hold no longer has")
}
