package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// offlineUnder is an allocator on desktop-8c16t with cpus offline, laid
// out by cfgYAML as a restart lays it out (BuildLayoutRunning).
func offlineUnder(t *testing.T, cfgYAML string, cpus ...int) *Allocator {
	t.Helper()
	topo := withOffline(topology(t, "desktop-8c16t"), cpus...)
	layout, problems := BuildLayoutRunning(topo, parseConfig(t, cfgYAML))
	require.False(t, problems.HasErrors(), "%v", problems)
	return New(topo, layout, false)
}

// A stopped container's hold names CPU 4, offline now, which the config
// in force (changed while the plugin was down) gives to the shared pool.
// Held, it would be the container's next run's once online, a shared-pool
// CPU the plugin itself pins an exclusive container to: the rule a
// container's record follows at a restart (Repin refuses such a CPU). The
// hold lets CPU 4 go and keeps CPU 5, and the Warning says so; the hold
// is not dropped whole, nor silently.
func TestRestoreHoldLetsGoAnOfflineCPUItsPoolNoLongerHas(t *testing.T) {
	a := offlineUnder(t, sharedTookCore4, 4)
	res, err := a.RestoreHold(Hold{Assignment: remembered(t, "x", "4-5", "")})
	require.NoError(t, err, "CPU 5 is still pool exclusive's: the hold keeps it")
	assert.Equal(t, "5", res.Assignment.CPUs.String())
	assert.Contains(t, res.Warning, "hold uid-x/c: offline CPUs 4 are another pool's as now configured, not pool exclusive's")
	assert.Contains(t, res.Warning, "which keeps CPUs 5")
	holds := a.Holds()
	require.Len(t, holds, 1)
	assert.Equal(t, "5", holds[0].CPUs.String(), "the hold as kept (and persisted)")
	assert.Empty(t, a.owner[4], "no one holds CPU 4")

	// Once CPU 4 is online it is the shared pool's, and the hold's next
	// run is not given it.
	full := topology(t, "desktop-8c16t")
	back, _ := a.Rebase(full, mustHotplug(t, a, full, sharedTookCore4))
	assert.True(t, back.MembersCPUs(pools.Shared).Contains(4), "shared runs on %s", back.MembersCPUs(pools.Shared))
	require.Len(t, back.Holds(), 1)
	assert.Equal(t, "5", back.Holds()[0].CPUs.String())
}

// With every CPU of the hold offline and another pool's there is nothing
// left to hold: it is refused, and the error (logged by the restart) says
// why.
func TestRestoreHoldRefusesAHoldWhoseCPUsAreAllAnotherPoolsOffline(t *testing.T) {
	a := offlineUnder(t, sharedTookCore4, 4, 12)
	_, err := a.RestoreHold(Hold{Assignment: remembered(t, "x", "4,12", "")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "hold uid-x/c: offline CPUs 4,12 are another pool's as now configured, not pool exclusive's")
	assert.Empty(t, a.Holds())
	assert.Empty(t, a.owner[4])
}

// A hide-hyperthreads hold's offline hidden sibling that the config in
// force gives to the shared pool is not its either: once online it runs
// the shared pool's load, not idle beside the container's next run. It
// leaves the hold's hidden siblings; the hold keeps its CPU.
func TestRestoreHoldLetsGoAnOfflineHiddenSiblingAnotherPoolHas(t *testing.T) {
	const siblingShared = `isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12,14-15"}
  shared: {cpus: "2-3,10-11,13"}
`
	a := offlineUnder(t, siblingShared, 13)
	h := remembered(t, "x", "5", "13")
	h.HideHyperthreads = true
	res, err := a.RestoreHold(Hold{Assignment: h})
	require.NoError(t, err)
	assert.Equal(t, "5", res.Assignment.CPUs.String())
	assert.Equal(t, "", res.Assignment.Reserved.String(), "sibling 13 joins shared when it comes online")
	assert.Contains(t, res.Warning, "offline CPUs 13 are another pool's")
}

// An offline CPU the config in force still carves into the hold's pool,
// and one the carving does not cover (smt/control off carves on the
// online CPUs alone), stay the hold's, with no warning.
func TestRestoreHoldKeepsAnOfflineCPUNothingGivesAnotherPool(t *testing.T) {
	a := offlineUnder(t, sharedTookCore4, 5)
	res, err := a.RestoreHold(Hold{Assignment: remembered(t, "x", "5-6", "")})
	require.NoError(t, err)
	assert.Equal(t, "5-6", res.Assignment.CPUs.String())
	assert.Empty(t, res.Warning)

	const cfgYAML = `isolatedCPUs: "2-15"
reservedCPUs: "0"
pools:
  exclusive: {cpus: "4-7"}
  shared: {cpus: "2-3"}
`
	topo := withOffline(topology(t, "xeon-1s-nosmt"), 5)
	require.True(t, topo.SMTDisabled())
	layout, problems := BuildLayoutRunning(topo, parseConfig(t, cfgYAML))
	require.False(t, problems.HasErrors(), "%v", problems)
	b := New(topo, layout, false)
	res, err = b.RestoreHold(Hold{Assignment: remembered(t, "y", "4-5", "")})
	require.NoError(t, err)
	assert.Equal(t, "4-5", res.Assignment.CPUs.String())
	assert.Empty(t, res.Warning)
}
