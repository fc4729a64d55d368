package plugin

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestartKeepsHeldOfflineCPUs (issue 34): CPUs that a running
// container and the hold of a stopped one keep, and that went offline
// while the plugin was away, stay theirs through the restart: the records
// keep them, nothing moves, they are reported, and no one else gets them,
// offline or back online, while their owners live.
func TestRestartKeepsHeldOfflineCPUs(t *testing.T) {
	f := newFakeRuntime(t, true)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	old := f.runPod(podSpec{name: "old", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	gone, _, err := f.createContainer(old, "gone", 2000)
	require.NoError(t, err)
	require.Equal(t, "5,13", f.cpus(gone))
	f.stopContainer(gone) // its CPUs stay held for its pod
	require.Contains(t, first.savedState(t).Held, "uid-old/gone")
	first.stop()

	// While the plugin is away, the kernel takes a CPU of each offline.
	root := f.sysfsRoot(desktop.fixture)
	setOnlineAt(t, root, 12, false)
	setOnlineAt(t, root, 13, false)

	second := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	st := second.savedState(t)
	require.Contains(t, st.Containers, fwd.Id)
	assert.Equal(t, "4,12", st.Containers[fwd.Id].CPUs, "the record keeps the CPU the kernel took offline")
	require.Contains(t, st.Held, "uid-old/gone", "the hold of the stopped container lives on")
	assert.Equal(t, "5,13", st.Held["uid-old/gone"].CPUs)
	assert.Equal(t, "4,12", f.cpus(fwd), "nothing moved the container")
	for _, u := range f.syncUpdates {
		assert.NotEqual(t, fwd.Id, u.ContainerId, "no update for the container")
	}
	assert.Equal(t, 2.0, testutil.ToFloat64(second.p.metrics.offlineHeld))
	assert.Contains(t, second.log.String(), "CPUs 12 of container telco/dpdk/fwd are offline")
	assert.Contains(t, second.log.String(), "CPUs 13 of stopped container telco/old/gone (held for its pod) are offline")
	ex, _ := layoutNow(second)
	assert.Equal(t, "4-7,14-15", ex, "offline CPUs are in no pool")

	other := f.runPod(podSpec{name: "other", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	big, _, err := f.createContainer(other, "big", 4000)
	require.NoError(t, err)
	assert.Equal(t, "6-7,14-15", f.cpus(big))
	_, _, err = f.createContainer(other, "one", 1000)
	require.Error(t, err, "4 and 5 are held online, 12 and 13 held offline")

	// Back online, they are still their owners'.
	setOnline(t, second, 12, true)
	setOnline(t, second, 13, true)
	waitLayout(t, second, "4-7,12-15")
	require.Eventually(t, func() bool { return testutil.ToFloat64(second.p.metrics.offlineHeld) == 0 }, 3*time.Second, 5*time.Millisecond)
	assert.Contains(t, second.log.String(), "CPU 12 came online: still held by container telco/dpdk/fwd")
	assert.Contains(t, second.log.String(), "CPU 13 came online: still held by stopped container telco/old/gone")
	_, _, err = f.createContainer(other, "one", 1000)
	require.Error(t, err, "back online, 12 and 13 are not free")
	assert.Equal(t, "4,12", f.cpus(fwd))

	// Their owners end: the CPUs are free again.
	f.stopContainer(fwd)
	f.removeContainer(fwd)
	f.stopPod(pod)
	f.removePod(pod)
	f.removeContainer(gone)
	f.stopPod(old)
	f.removePod(old)
	one, _, err := f.createContainer(other, "one", 4000)
	require.NoError(t, err)
	assert.Equal(t, "4-5,12-13", f.cpus(one))
}

// TestRestartKeepsHeldOfflineCPUsOnCgroupV1 (issue 34): cgroup v1 drops an
// offline CPU from the container's cpuset for good, so the runtime reports
// the rest; the container is still where it was put, keeps the CPU in its
// record, and gets it back when it comes online.
func TestRestartKeepsHeldOfflineCPUsOnCgroupV1(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	first.stop()
	setOnlineAt(t, f.sysfsRoot(desktop.fixture), 12, false)
	f.setCPUs(fwd, "4")

	second := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	assert.Equal(t, "4,12", second.savedState(t).Containers[fwd.Id].CPUs)
	assert.Equal(t, "4", f.cpus(fwd), "not moved, and not sent an offline CPU")
	assert.Equal(t, 1.0, testutil.ToFloat64(second.p.metrics.offlineHeld))
	setOnline(t, second, 12, true)
	require.Eventually(t, func() bool { return f.cpus(fwd) == "4,12" }, 3*time.Second, 5*time.Millisecond, "fwd runs on %s", f.cpus(fwd))
	other := f.runPod(podSpec{name: "other", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	c, _, err := f.createContainer(other, "c", 6000)
	require.NoError(t, err)
	assert.Equal(t, "5-7,13-15", f.cpus(c), "12 is fwd's")
}
