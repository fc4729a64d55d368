package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

const fullCoresOfflineSiblingConfig = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
`

// A full-pcpus-only container takes whole cores: every thread of each,
// online or offline. Core 4's sibling 12 is offline: 4 is all the core
// shows online, and free, but the core is not whole: 12 joins exclusive
// free when it comes online and would go to the next container, beside
// the one that asked for whole cores. It is never given core 4 alone;
// once 12 is online the core is whole and is given whole.
func TestFullPCPUsOnlyTakesNoCoreWhoseSiblingIsOffline(t *testing.T) {
	a := newOfflineAllocator(t, "desktop-8c16t", fullCoresOfflineSiblingConfig, cpuset.New(12))
	require.Equal(t, "4-7,13-15", a.PoolCPUs("exclusive").String())
	full := func(id string, n int) Request {
		r := exclusive(id, n)
		r.Options.FullPCPUsOnly = true
		return r
	}
	got := cpuset.New()
	for _, id := range []string{"f1", "f2", "f3"} {
		res, err := a.Allocate(full(id, 2))
		require.NoError(t, err)
		got = got.Union(res.Assignment.CPUs)
		assert.Nil(t, a.partCore(res.Assignment.CPUs), "%s on whole cores: %s", id, res.Assignment.CPUs)
		assert.False(t, res.Assignment.CPUs.Contains(4), "%s is not on core 4, whose sibling 12 is offline: %s", id, res.Assignment.CPUs)
	}
	assert.Equal(t, "5-7,13-15", got.String())
	_, err := a.Allocate(full("f4", 2))
	assert.Error(t, err, "no whole core is left: core 4 lacks its offline sibling")
	checkInvariants(t, a)

	// 12 comes online: free in exclusive, and core 4 whole again.
	on := topology(t, "desktop-8c16t")
	a, _ = a.Rebase(on, mustHotplug(t, a, on, fullCoresOfflineSiblingConfig))
	require.True(t, a.FreeCPUs("exclusive").Contains(12), "12 is free in exclusive once online")
	for _, id := range []string{"f1", "f2", "f3"} {
		as, _ := a.Get(id)
		assert.False(t, as.CPUs.Contains(12), "%s is not given 12", id)
	}
	res, err := a.Allocate(full("f4", 2))
	require.NoError(t, err)
	assert.Equal(t, "4,12", res.Assignment.CPUs.String(), "the whole core, both threads")
	checkInvariants(t, a)
}

// A resize that grows a full-pcpus-only container takes whole cores too:
// not core 4, whose sibling 12 is offline.
func TestFullPCPUsOnlyGrowTakesNoCoreWhoseSiblingIsOffline(t *testing.T) {
	a := newOfflineAllocator(t, "desktop-8c16t", fullCoresOfflineSiblingConfig, cpuset.New(12))
	r := exclusive("f", 2)
	r.Options.FullPCPUsOnly = true
	res, err := a.Allocate(r)
	require.NoError(t, err)
	require.False(t, res.Assignment.CPUs.Contains(4))
	r.MilliCPU = 6000
	res, err = a.Resize(r)
	require.NoError(t, err)
	assert.Equal(t, "5-7,13-15", res.Assignment.CPUs.String(), "three whole cores; not core 4")
	r.MilliCPU = 8000
	_, err = a.Resize(r)
	assert.Error(t, err, "only core 4 is left, without its offline sibling")
	checkInvariants(t, a)
}
