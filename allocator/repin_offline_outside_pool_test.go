package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// Repin pins a container back on its record only where it may run: on
// CPUs of its pool as now configured (restore's rule; the pool is checked
// on its online CPUs; its offline ones on the pool as carved): a record
// CPU the config handed to the shared pool while the plugin was down, and
// offline, must not be held for the exclusive container: once it came online the
// container would run on a shared-pool CPU the plugin itself pinned it to.
// Repin refuses the record, and the container is placed anew.
func TestRepinDoesNotHoldAnOfflineCPUItsPoolNoLongerHas(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", sharedTookCore4) // CPU 4 is the shared pool's now
	off := withOffline(a.Topology(), 4)
	b, _ := a.Rebase(off, mustHotplug(t, a, off, sharedTookCore4))

	res, outcome, err := b.Repin(Remembered{Assignment: remembered(t, "x", "4-5", ""), RunsOn: set(t, "2-3")})
	t.Logf("outcome %v cpus %s err %v", outcome, res.Assignment.CPUs, err)
	require.Equal(t, NeedsPlacement, outcome, "CPU 4 is no longer in pool exclusive (config: %s), yet held for x on %s", b.layout.Pool(pools.Exclusive), res.Assignment.CPUs)
	assert.ErrorContains(t, err, "offline CPUs 4 are another pool's as now configured, not pool exclusive's")
	_, held := b.Get("x")
	assert.False(t, held, "a refused Repin holds nothing")
}
