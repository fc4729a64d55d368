package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestNewMembersOfAnAllOfflinePoolRunWhereItsMembersDo: while every CPU of
// the shared pool is offline, a shared container created meanwhile (a
// member the kubelet restarts) and the shared part of an exclusive one
// that asks for it go to infra, as the running members did; with every
// CPU of infra offline too (both pools empty) the refusal says the CPUs
// are offline, not that the config lacks a pool; a config that gives no
// shared pool is refused as before.
func TestNewMembersOfAnAllOfflinePoolRunWhereItsMembersDo(t *testing.T) {
	yaml := `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {cpus: "4-7,12-15"}, shared: {cpus: "2-3,10-11"}}}`
	a := newAllocator(t, "desktop-8c16t", yaml)
	full := a.Topology()
	off := withOffline(full, 2, 3, 10, 11)
	b, _ := a.Rebase(off, mustHotplug(t, a, off, yaml))
	require.True(t, b.PoolCPUs(pools.Shared).IsEmpty())

	res, err := b.Allocate(shared("s"))
	require.NoError(t, err)
	assert.Equal(t, "0-1,8-9", res.Assignment.CPUs.String(), "a new member runs on infra")
	x := exclusive("x", 1)
	x.WithShared = true
	res, err = b.Allocate(x)
	require.NoError(t, err)
	assert.Equal(t, "0-1,8-9", res.Assignment.Shared.String(), "and so does a shared part")

	// Both pools empty: the CPUs are offline, no config is at fault.
	both := withOffline(full, 0, 1, 2, 3, 8, 9, 10, 11)
	c := New(both, &Layout{Online: both.Online, Exclusive: b.Layout().Exclusive, SharedCarved: b.Layout().SharedCarved}, false)
	_, err = c.Allocate(shared("s2"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "every CPU of pool shared is offline")
	x2 := exclusive("x2", 1)
	x2.WithShared = true
	_, err = c.Allocate(x2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "every CPU of pool shared is offline")

	// No shared pool in the config: refused, and the config is the fix.
	none := newAllocator(t, "desktop-8c16t", `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {cpus: "2-7,10-15"}}}`)
	_, err = none.Allocate(shared("s3"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "configure pools.shared")
}
