package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A running container's record names CPU 4, offline now, which the config
// in force (changed while the plugin was down) gives to the shared pool.
// Readmit kept the whole record when the runtime ran it on the rest (cgroup
// v1 drops an offline CPU from the cpuset) or on all of it (cgroup v2 keeps
// it listed): CPU 4 was the container's and, once online, the shared
// pool's too. CPU 4 leaves the record; without it the record is no longer
// the container's size, so it is not kept: it NeedsRepin, and Repin refuses
// it as it refuses any record with such a CPU (the container is placed
// anew by its request), saying which CPU and why.
func TestReadmitDoesNotKeepAnOfflineCPUTheConfigGaveAnotherPool(t *testing.T) {
	for _, runsOn := range []string{"5", "4-5"} {
		t.Run("runs on "+runsOn, func(t *testing.T) {
			a := offlineUnder(t, sharedTookCore4, 4)
			r := Remembered{Assignment: remembered(t, "x", "4-5", ""), RunsOn: set(t, runsOn)}
			res, outcome, err := a.Readmit(r)
			t.Logf("outcome %v cpus %s err %v", outcome, res.Assignment.CPUs, err)
			require.Equal(t, NeedsRepin, outcome, "CPU 4 is the shared pool's as now configured, yet kept for x on %s", res.Assignment.CPUs)
			_, held := a.Get("x")
			assert.False(t, held, "nothing added")
			assert.Empty(t, a.owner[4], "no one holds CPU 4")

			_, outcome, err = a.Repin(r)
			assert.Equal(t, NeedsPlacement, outcome)
			assert.ErrorContains(t, err, "offline CPUs 4 are another pool's as now configured, not pool exclusive's")
		})
	}
}

// A hide-hyperthreads container's offline hidden sibling that the config
// in force gives to the shared pool leaves its record, as it leaves a
// hold's: its size is its CPUs, which it keeps, where it runs, and the
// Warning names the sibling. Repin, for one that must be pinned again,
// does the same.
func TestReadmitLetsGoAnOfflineHiddenSiblingAnotherPoolHas(t *testing.T) {
	const siblingShared = `isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12,14-15"}
  shared: {cpus: "2-3,10-11,13"}
`
	rec := func() Remembered {
		as := remembered(t, "x", "5", "13")
		as.HideHyperthreads = true
		return Remembered{Assignment: as, RunsOn: set(t, "5")}
	}
	a := offlineUnder(t, siblingShared, 13)
	res, outcome, err := a.Readmit(rec())
	require.NoError(t, err)
	require.Equal(t, Kept, outcome)
	assert.Equal(t, "5", res.Assignment.CPUs.String())
	assert.Equal(t, "", res.Assignment.Reserved.String(), "sibling 13 joins shared when it comes online")
	assert.Contains(t, res.Warning, "container x: offline CPUs 13 are another pool's as now configured, not pool exclusive's; they leave its record, which keeps CPUs 5")
	assert.Empty(t, a.owner[13])

	b := offlineUnder(t, siblingShared, 13)
	r := rec()
	r.RunsOn = set(t, "4-7")
	res, outcome, err = b.Repin(r)
	require.NoError(t, err)
	require.Equal(t, Repinned, outcome)
	assert.Equal(t, "", res.Assignment.Reserved.String())
	assert.Contains(t, res.Warning, "offline CPUs 13 are another pool's")
}
