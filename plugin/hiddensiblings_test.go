package plugin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var hideHyperthreads = map[string]string{"pool.cpupool.dev": "exclusive", "hide-hyperthreads.cpupool.dev": "true"}

// TestHiddenSiblingComesOnlineWhilePluginRuns: a hide-hyperthreads
// container placed on a core whose sibling is offline keeps that sibling
// idle when it comes online: the record gains it, and no other container
// gets it.
func TestHiddenSiblingComesOnlineWhilePluginRuns(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	setOnline(t, rp, 15, false)
	waitLayout(t, rp, "4-7,12-14")
	big, _, err := f.createContainer(f.runPod(podSpec{name: "big", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}), "c", 6000)
	require.NoError(t, err)
	require.Equal(t, "4-6,12-14", f.cpus(big))
	hide, _, err := f.createContainer(f.runPod(podSpec{name: "hide", namespace: "telco", annotations: hideHyperthreads}), "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "7", f.cpus(hide))
	st := rp.savedState(t).Containers[hide.Id]
	assert.True(t, st.HideHyperthreads, "the record keeps the option")
	assert.Empty(t, st.Reserved, "its sibling is offline")

	setOnline(t, rp, 15, true)
	waitLayout(t, rp, "4-7,12-15")
	require.Eventually(t, func() bool { return rp.savedState(t).Containers[hide.Id].Reserved == "15" }, 3*time.Second, 5*time.Millisecond,
		"the sibling that came online is recorded as its hidden sibling")
	_, _, err = f.createContainer(f.runPod(podSpec{name: "next", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}), "c", 1000)
	assert.Error(t, err, "15 is the hide-hyperthreads container's idle sibling, not free")
}

// TestHiddenSiblingComesOnlineWhilePluginIsAway: the option outlives a
// restart in the state file, and a sibling that came online while the
// plugin was away is held idle for the container from the Synchronize on.
func TestHiddenSiblingComesOnlineWhilePluginIsAway(t *testing.T) {
	f := newFakeRuntime(t, true)
	root := f.sysfsRoot(desktop.fixture)
	setOnlineAt(t, root, 15, false)
	first := startPlugin(t, f, desktop, statePath(f))
	big, _, err := f.createContainer(f.runPod(podSpec{name: "big", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}), "c", 6000)
	require.NoError(t, err)
	require.Equal(t, "4-6,12-14", f.cpus(big))
	hide, _, err := f.createContainer(f.runPod(podSpec{name: "hide", namespace: "telco", annotations: hideHyperthreads}), "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "7", f.cpus(hide))
	require.True(t, first.savedState(t).Containers[hide.Id].HideHyperthreads)
	first.stop()

	setOnlineAt(t, root, 15, true)
	second := startPlugin(t, f, desktop, statePath(f))
	st := second.savedState(t).Containers[hide.Id]
	assert.True(t, st.HideHyperthreads, "read back and written again")
	assert.Equal(t, "15", st.Reserved, "the sibling that came online is its idle sibling")
	assert.Equal(t, "7", f.cpus(hide), "nothing moved")
	_, _, err = f.createContainer(f.runPod(podSpec{name: "next", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}), "c", 1000)
	assert.Error(t, err, "15 is not free")
}
