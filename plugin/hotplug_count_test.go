package plugin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// desktopCounted is desktop with the isolated pools given by count: shared
// takes the whole core 2 (CPUs 2,10) and the unsized exclusive pool every
// other isolated CPU (3-7,11-15).
var desktopCounted = testNode{fixture: "desktop-8c16t", config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  shared: {count: 2}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`}

// desktopExclusive12 gives exclusive all 12 isolated CPUs by count.
var desktopExclusive12 = testNode{fixture: "desktop-8c16t", config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {count: 12}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`}

func sharedNow(rp *runningPlugin) string {
	_, l := rp.p.Layout()
	return l.Shared.String()
}

// TestRestartWithFreeCountedCPUOffline (issue 41, item 1): a free CPU of a
// pool given by count that is offline at a restart only leaves its pool,
// as it does in a running daemon: the pools are carved on the present
// CPUs, then lose the offline ones. The exclusive container stays on its
// core, which no pool splits, and the CPU rejoins its pool when it comes
// back.
func TestRestartWithFreeCountedCPUOffline(t *testing.T) {
	f := newFakeRuntime(t, true)
	first := startPlugin(t, f, desktopCounted, statePath(f))
	require.Equal(t, "2,10", sharedNow(first))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "3,11", f.cpus(fwd))
	first.stop()

	setOnlineAt(t, f.sysfsRoot(desktopCounted.fixture), 10, false)
	second := startPlugin(t, f, desktopCounted, statePath(f), fastHotplug)
	assert.Equal(t, "2", sharedNow(second), "the free shared CPU 10 left its pool; no other CPU took its place")
	ex, _ := layoutNow(second)
	assert.Equal(t, "3-7,11-15", ex)
	assert.Equal(t, "3,11", f.cpus(fwd))
	assert.Equal(t, "3,11", second.savedState(t).Containers[fwd.Id].CPUs)
	assert.NotContains(t, second.log.String(), "outside pool")
	assert.NotContains(t, second.log.String(), "splits the hyperthreads")

	setOnline(t, second, 10, true)
	waitShared(t, second, "2,10")
	ex, _ = layoutNow(second)
	assert.Equal(t, "3-7,11-15", ex)
}

func waitShared(t *testing.T, rp *runningPlugin, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return sharedNow(rp) == want }, 3*time.Second, 5*time.Millisecond, "shared %s; log:\n%s",
		func() string { return sharedNow(rp) }(), rp.log.String())
}

// TestReloadWithCountedCPUOffline (issue 41, item 1): a reload that changes
// only the log level while a free CPU of a counted pool is offline lays
// the pools out as they are and is applied, in a running daemon and after
// a restart while the CPU was offline.
func TestReloadWithCountedCPUOffline(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopCounted, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "3,11", f.cpus(fwd))

	setOnline(t, rp, 10, false)
	waitShared(t, rp, "2")
	debug := desktopCounted.config + "logLevel: debug\n"
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, debug), nil, "test"), "log:\n%s", rp.log.String())
	assert.Equal(t, 1.0, reloads(rp, "applied"))
	assert.Equal(t, "2", sharedNow(rp))
	assert.Equal(t, "3,11", f.cpus(fwd))
	rp.stop()

	second := startPlugin(t, f, desktopCounted, statePath(f), fastHotplug)
	require.NoError(t, second.p.Reload(reloadConfig(t, second, desktopCounted.config), nil, "test"), "log:\n%s", second.log.String())
	assert.Equal(t, 1.0, reloads(second, "applied"))
	assert.Equal(t, "2", sharedNow(second))
	setOnline(t, second, 10, true)
	waitShared(t, second, "2,10")
}

// TestStartCountFitsPresentCPUs (issue 41, item 1): a count that fits the
// present CPUs is no error because one of them is offline: the daemon
// starts with the pool less that CPU, which joins it when it comes online.
func TestStartCountFitsPresentCPUs(t *testing.T) {
	f := newFakeRuntime(t, true)
	setOnlineAt(t, f.sysfsRoot(desktopExclusive12.fixture), 5, false)
	rp := startPlugin(t, f, desktopExclusive12, statePath(f), fastHotplug)
	ex, infra := layoutNow(rp)
	assert.Equal(t, "2-4,6-7,10-15", ex)
	assert.Equal(t, "0-1,8-9", infra)
	setOnline(t, rp, 5, true)
	waitLayout(t, rp, "2-7,10-15")
}

// TestHotplugNeverLendsReserved (issue 41, item 5): a reserved CPU that
// comes back online while another CPU of a counted pool is still offline
// is reserved again: an exclusive-non-isolcpus container never gets it.
func TestHotplugNeverLendsReserved(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopExclusive12, statePath(f), fastHotplug)
	setOnline(t, rp, 5, false)
	waitLayout(t, rp, "2-4,6-7,10-15")
	setOnline(t, rp, 8, false)
	require.Eventually(t, func() bool { _, infra := layoutNow(rp); return infra == "0-1,9" }, 3*time.Second, 5*time.Millisecond)
	setOnline(t, rp, 8, true)
	require.Eventually(t, func() bool { _, infra := layoutNow(rp); return infra == "0-1,8-9" }, 3*time.Second, 5*time.Millisecond)

	_, l := rp.p.Layout()
	assert.Equal(t, "0,8", l.Reserved.String(), "8 is reserved again")
	assert.Equal(t, "1,9", l.ExclusiveNonIsolcpus.String(), "and never lent")
	pod := f.runPod(podSpec{name: "job", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive-non-isolcpus"}})
	c, _, err := f.createContainer(pod, "eni", 3000)
	if err == nil {
		got, perr := cpuset.Parse(f.cpus(c))
		require.NoError(t, perr)
		assert.False(t, got.Contains(8), "a reserved CPU was lent: %s", got)
	}
}
