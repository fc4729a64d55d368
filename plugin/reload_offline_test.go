package plugin

import (
	"context"
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

// TestReloadRefusedWhenOfflineGrantedCPULeavesExclusive (review rvB): the
// kubelet allocated CPU 7 as a cpupool.dev/exclusive device; before its
// container is created, CPU 7 goes offline. A reload that gives CPU 7 to
// the shared pool was applied (offline CPUs were left out of the check),
// and once CPU 7 came back, the container the kubelet created with its
// allocation was refused: the pod failed to start. The reload is refused
// up front, naming the allocation, the CPU, and that it is offline; the
// container is then created on its CPU.
func TestReloadRefusedWhenOfflineGrantedCPULeavesExclusive(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopKubelet, statePath(f), fastHotplug)
	env := grantEnv(t, rp.p, "7")

	setOnline(t, rp, 7, false)
	waitLayout(t, rp, "4-6,12-15")
	err := rp.p.Reload(reloadConfig(t, rp, desktopGrown+"kubelet: {devicePlugin: true}\n"), nil, "test")
	setOnline(t, rp, 7, true)
	var re *ReloadError
	require.ErrorAs(t, err, &re, "the reload moved the kubelet's allocation's offline CPU to shared; log:\n%s", rp.log.String())
	assert.Equal(t, ReloadRefused, re.Result)
	require.Len(t, re.Blockers, 1)
	assert.True(t, re.Blockers[0].Pending)
	assert.Equal(t, "7", re.Blockers[0].CPUs.String())
	assert.Contains(t, re.Blockers[0].Reason, "CPU 7 is offline and outside pool exclusive (4-6,12-14) as now configured")
	waitLayout(t, rp, "4-7,12-15")

	pod := f.runPod(podSpec{name: "job", namespace: "telco"})
	_, _, err = f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err, "the kubelet's allocation is refused; log:\n%s", rp.log.String())
}

// TestReloadRefusedWhenOfflineClaimedCPULeavesItsPool: the same for a
// prepared DRA claim whose container has not started: CPU 12 of the
// claim's 4,12 goes offline, and a reload that gives 12 to shared is
// refused, naming the claim; once 12 is back, the container starts on
// the claim's CPUs.
func TestReloadRefusedWhenOfflineClaimedCPULeavesItsPool(t *testing.T) {
	f := newFakeRuntime(t, true)
	n := startDRAOn(t, f, desktopDRA)
	n.p.hotplug.interval = 10 * time.Millisecond
	var slices publishedSlices
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.driver.Run(ctx, slices.publish)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	env := n.prepare(t, "uid-1", 0, 2, pod)
	require.Equal(t, "4,12", n.claimCPUs(t, "uid-1"))

	setOnline(t, n.runningPlugin, 12, false)
	waitLayout(t, n.runningPlugin, "4-7,13-15")
	err := n.p.Reload(reloadConfig(t, n.runningPlugin, desktopMoved12+"dra: {enabled: true}\n"), nil, "test")
	setOnline(t, n.runningPlugin, 12, true)
	var re *ReloadError
	require.ErrorAs(t, err, &re, "the reload moved the claim's offline CPU to shared; log:\n%s", n.log.String())
	assert.Equal(t, ReloadRefused, re.Result)
	require.Len(t, re.Blockers, 1)
	assert.Equal(t, "DRA claim telco/claim-uid-1/cpus", re.Blockers[0].Who)
	assert.Equal(t, "12", re.Blockers[0].CPUs.String())
	assert.Contains(t, re.Blockers[0].Reason, "CPU 12 is offline and outside pool exclusive (4-7,13-15) as now configured")
	waitLayout(t, n.runningPlugin, "4-7,12-15")

	_, resp, err := f.createWithEnv(pod, "fwd", 10, env...)
	require.NoError(t, err, "log:\n%s", n.log.String())
	assert.Equal(t, "4,12", resp.Adjust.Linux.Resources.Cpu.Cpus)
}
