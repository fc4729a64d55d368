package plugin

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// desktopMoved12 is desktop with CPU 12 given from exclusive to shared:
// the one CPU the tests below take offline under what holds it.
const desktopMoved12 = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,13-15"}
  shared: {cpus: "2-3,10-12"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`

// TestReloadRefusedWhenOfflineHeldCPULeavesItsPool (review rvB): a reload
// while an exclusive container's CPU is offline, whose config gives that
// CPU to the shared pool, is refused as it is with the CPU online. It was
// applied (the offline CPU was not checked), and once the CPU came back
// the container ran on a CPU the layout called shared, and the very same
// config, reloaded again, was refused: the config in force refused. The
// refusal names the container and the CPU and says it is offline.
func TestReloadRefusedWhenOfflineHeldCPULeavesItsPool(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))

	setOnline(t, rp, 12, false)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rp.p.metrics.offlineHeld) == 1 }, 3*time.Second, 5*time.Millisecond)

	err = rp.p.Reload(reloadConfig(t, rp, desktopMoved12), nil, "test")
	var re *ReloadError
	require.ErrorAs(t, err, &re, "a reload that gives an offline held CPU to shared is applied; log:\n%s", rp.log.String())
	assert.Equal(t, ReloadRefused, re.Result)
	require.Len(t, re.Blockers, 1)
	assert.Equal(t, "telco/dpdk/fwd", re.Blockers[0].Who)
	assert.Equal(t, "12", re.Blockers[0].CPUs.String())
	assert.Contains(t, re.Blockers[0].Reason, "CPU 12 is offline and outside pool exclusive (4-7,13-15) as now configured")
	rp.p.mu.Lock()
	assert.Equal(t, "4-7,12-15", rp.p.cfg.Pools.Exclusive.CPUs, "the old config stays")
	rp.p.mu.Unlock()

	setOnline(t, rp, 12, true)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rp.p.metrics.offlineHeld) == 0 }, 3*time.Second, 5*time.Millisecond)
	waitLayout(t, rp, "4-7,12-15")
	// The same config, reloaded with the CPU online, is refused the same.
	err = rp.p.Reload(reloadConfig(t, rp, desktopMoved12), nil, "SIGHUP")
	require.ErrorAs(t, err, &re)
	assert.Equal(t, ReloadRefused, re.Result)
	// And the config in force, reloaded again, is applied.
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktop.config), nil, "SIGHUP"))
}

// TestReloadRefusedWhenOfflineHeldCPUOfHoldLeavesItsPool: the same for the
// hold of a stopped container (its pod lives, it may restart on its CPUs).
func TestReloadRefusedWhenOfflineHeldCPUOfHoldLeavesItsPool(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	f.stopContainer(fwd)

	setOnline(t, rp, 12, false)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rp.p.metrics.offlineHeld) == 1 }, 3*time.Second, 5*time.Millisecond)

	err = rp.p.Reload(reloadConfig(t, rp, desktopMoved12), nil, "test")
	var re *ReloadError
	require.ErrorAs(t, err, &re, "a reload that gives a hold's offline CPU to shared is applied; log:\n%s", rp.log.String())
	require.Len(t, re.Blockers, 1)
	assert.True(t, re.Blockers[0].Held)
	assert.Equal(t, "12", re.Blockers[0].CPUs.String())
	assert.Contains(t, re.Blockers[0].Reason, "CPU 12 is offline and outside pool exclusive (4-7,13-15) as now configured")
}
