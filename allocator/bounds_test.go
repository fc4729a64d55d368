package allocator

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
)

// Finding 8: a CPU request near the largest int64 overflowed the rounding
// and made placement panic.
func TestHugeCPURequestIsRefusedNotPanics(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "4-7,12-15"`)
	for _, milli := range []int64{math.MaxInt64, math.MaxInt64 - 998, math.MaxInt64 / 2, 1 << 40} {
		assert.Positive(t, CPUsFor(milli), "%d", milli)
		r := exclusive("huge", 1)
		r.MilliCPU = milli
		for _, opts := range []config.Allocation{{}, {HideHyperthreads: true}, {FullPCPUsOnly: true}, {DistributeAcrossNUMA: true}} {
			r.Options = opts
			_, err := a.Allocate(r)
			require.Error(t, err, "%d %+v", milli, opts)
		}
	}
}

// Finding 5 at the allocator: CPUs the node does not have never index past
// its tables, even when a restore is forced.
func TestRestoreDropsCPUsTheNodeLacks(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "4-7,12-15"`)
	as := Assignment{ID: "x", Pod: PodRef{UID: "u"}, Container: "c", Pool: pools.Exclusive, MilliCPU: 2000, CPUs: cpuset.New(4, 40), Reserved: cpuset.New(1 << 20)}
	_, err := a.keep(as)
	assert.ErrorContains(t, err, "not on this node")
	got, ok := a.Get("x")
	require.True(t, ok)
	assert.Equal(t, "4", got.CPUs.String())
	_, err = a.keep(Assignment{ID: "y", Pool: pools.Exclusive, CPUs: cpuset.New(99)})
	assert.Error(t, err)
	_, err = a.RestoreHold(Hold{Assignment: Assignment{ID: "z", Pod: PodRef{UID: "u"}, Container: "z", Pool: pools.Exclusive,
		CPUs: cpuset.New(5, 4000)}})
	assert.ErrorContains(t, err, "CPUs 4000 are not on this node")
}
