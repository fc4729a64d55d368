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

// siblingsInShared gives exclusive one thread of cores 4-7; their
// siblings 12-15 are listed in shared.
var siblingsInShared = testNode{fixture: "desktop-8c16t", config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7"}
  shared: {cpus: "2-3,10-15"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`}

// siblingsInSharedGrown moves CPU 3 from shared to exclusive; 12-15 stay
// in shared.
const siblingsInSharedGrown = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "3-7"}
  shared: {cpus: "2,10-15"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`

// TestReloadKeepingAnOfflineSiblingInSharedIsNotRefused: a
// hide-hyperthreads container runs on CPU 4, placed while its sibling 12
// was offline and exclusive's; the plugin restarts with a config that
// lists 12 in shared. 12 is not its hidden sibling when it comes online
// (it joins shared) in the config in force nor in the next one, so a
// reload that keeps it there cannot take it from the container and must
// not be refused only because 12 is offline; the same reload is applied
// once 12 is online.
func TestReloadKeepingAnOfflineSiblingInSharedIsNotRefused(t *testing.T) {
	f := newFakeRuntime(t, true)
	root := f.sysfsRoot(desktop.fixture)
	for _, cpu := range []int{12, 13, 14, 15} {
		setOnlineAt(t, root, cpu, false)
	}
	first := startPlugin(t, f, desktop, statePath(f))
	hide, _, err := f.createContainer(f.runPod(podSpec{name: "hide", namespace: "telco", annotations: hideHyperthreads}), "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "4", f.cpus(hide), "12, its sibling, is exclusive's in this config")
	first.stop()

	rp := startPlugin(t, f, siblingsInShared, statePath(f), fastHotplug)
	require.Equal(t, "4", f.cpus(hide), "kept where it runs")
	require.Equal(t, "2-3,10-11", sharedNow(rp))
	err = rp.p.Reload(reloadConfig(t, rp, siblingsInSharedGrown), nil, "test")
	require.NoError(t, err, "log:\n%s", rp.log.String())
	for _, cpu := range []int{12, 13, 14, 15} {
		setOnline(t, rp, cpu, true)
	}
	require.Eventually(t, func() bool { return sharedNow(rp) == "2,10-15" }, 3*time.Second, 5*time.Millisecond)
	assert.Empty(t, rp.savedState(t).Containers[hide.Id].Reserved, "12 joined shared, not the container")
	assert.NoError(t, rp.p.Reload(reloadConfig(t, rp, siblingsInSharedGrown), nil, "test"), "online: the same reload is applied")
}
