package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
)

// desktopOfflineMoved gives CPU 12, exclusive in desktop, to the shared
// pool, and CPU 7 stays exclusive: a reload that takes an exclusive CPU
// away while it may be offline.
const desktopOfflineMoved = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,13-15"}
  shared: {cpus: "2-3,10-12"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`

// waitOfflineHeld waits until the plugin counts n CPUs kept offline by
// containers and holds (the hotplug watcher saw the change).
func waitOfflineHeld(t *testing.T, rp *runningPlugin, n float64) {
	t.Helper()
	require.Eventually(t, func() bool { return testutil.ToFloat64(rp.p.metrics.offlineHeld) == n }, 3*time.Second, 5*time.Millisecond,
		"offline held CPUs; log:\n%s", rp.log.String())
}

// TestReloadWhileAGrantedCPUIsOfflineKeepsTheAllocation: the kubelet
// allocated CPU 7 as a cpupool.dev/exclusive device; before its container
// is created, CPU 7 goes offline. A reload that gives CPU 7 to the shared
// pool used to be applied (the kubelet allocation's offline CPU was left
// out of the check), CPU 7 came back in shared, and the container the
// kubelet then created with its allocation was refused: the pod never
// started. The reload is refused, naming the allocation and the CPU, and
// the container starts on its CPU once it is back.
func TestReloadWhileAGrantedCPUIsOfflineKeepsTheAllocation(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopKubelet, statePath(f), fastHotplug)
	env := grantEnv(t, rp.p, "7")

	setOnline(t, rp, 7, false)
	waitLayout(t, rp, "4-6,12-15")
	err := rp.p.Reload(reloadConfig(t, rp, desktopGrown+"kubelet: {devicePlugin: true}\n"), nil, "test")
	require.Error(t, err, "a reload that gives the offline CPU of a kubelet allocation to shared")
	assert.Contains(t, err.Error(), "kubelet allocation")
	assert.Contains(t, err.Error(), "(CPUs 7)")
	assert.Contains(t, rp.log.String(), "CPU 7 is offline")
	setOnline(t, rp, 7, true)
	waitLayout(t, rp, "4-7,12-15")

	pod := f.runPod(podSpec{name: "job", namespace: "telco"})
	ctr, _, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err, "the kubelet's allocation is kept; log:\n%s", rp.log.String())
	assert.Equal(t, "7", f.cpus(ctr))
}

// TestReloadWhileAHeldCPUIsOfflineIsRefused: an exclusive container runs
// on CPUs 4 and 12; CPU 12 goes offline (it stays the container's). A
// reload that gives CPU 12 to shared used to be applied (Relayout judges
// online CPUs only); once CPU 12 came back, still the container's, the
// config in force was refused at every later reload, and shared members
// were handed a CPU an exclusive container owns. The reload is refused,
// naming the container and its offline CPU.
func TestReloadWhileAHeldCPUIsOfflineIsRefused(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))

	setOnline(t, rp, 12, false)
	waitOfflineHeld(t, rp, 1)
	first := rp.p.Reload(reloadConfig(t, rp, desktopOfflineMoved), nil, "test")
	require.Error(t, first, "a reload that gives a running container's offline CPU to shared")
	assert.Contains(t, first.Error(), "telco/dpdk/fwd (CPUs 12)")
	assert.Contains(t, rp.log.String(), "CPU 12 is offline")
	setOnline(t, rp, 12, true)
	waitOfflineHeld(t, rp, 0)
	ex, _ := layoutNow(rp)
	assert.Equal(t, "4-7,12-15", ex, "the old config stays in force")
	assert.Equal(t, "4,12", f.cpus(fwd))
}

// TestReloadWhileAHeldCPUOfAStoppedContainerIsOfflineIsRefused: the same
// for the hold of a stopped container (its pod lives, a restart of the
// container gets its CPUs back).
func TestReloadWhileAHeldCPUOfAStoppedContainerIsOfflineIsRefused(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	f.exitContainer(fwd, 1)
	require.Len(t, rp.p.alloc.Holds(), 1)

	setOnline(t, rp, 12, false)
	waitOfflineHeld(t, rp, 1)
	err = rp.p.Reload(reloadConfig(t, rp, desktopOfflineMoved), nil, "test")
	require.Error(t, err, "a reload that gives a hold's offline CPU to shared")
	assert.Contains(t, err.Error(), "telco/dpdk/fwd (CPUs 12)")
	setOnline(t, rp, 12, true)
	waitOfflineHeld(t, rp, 0)

	f.removeContainer(fwd)
	again, _, err := f.createAttempt(pod, "fwd", 1, 2000)
	require.NoError(t, err, "log:\n%s", rp.log.String())
	assert.Equal(t, "4,12", f.cpus(again), "the restarted container gets its held CPUs back")
}

// TestReloadWhileAHeldCPUIsOfflineKeepsWhatCannotMoveIt: the check of
// offline CPUs refuses only what could move them. The config in force,
// reloaded unchanged (SIGHUP), is applied; so is a change of other keys
// of the pools that lists the offline CPU in its holder's pool.
func TestReloadWhileAHeldCPUIsOfflineKeepsWhatCannotMoveIt(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))

	setOnline(t, rp, 12, false)
	waitOfflineHeld(t, rp, 1)
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktop.config), nil, "SIGHUP"), "the config in force, unchanged; log:\n%s", rp.log.String())
	listed := `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-6,12-14"}
  shared: {cpus: "2-3,7,10-11,15"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, listed), nil, "test"), "CPU 12 is listed in pools.exclusive.cpus; log:\n%s", rp.log.String())
	setOnline(t, rp, 12, true)
	waitOfflineHeld(t, rp, 0)
	ex, _ := layoutNow(rp)
	assert.Equal(t, "4-6,12-14", ex)
	assert.Equal(t, "4,12", f.cpus(fwd))
}

// TestReloadWhileAClaimedCPUIsOfflineKeepsTheClaim: the same for a
// prepared DRA claim whose container has not started: its offline CPU
// must not be given to another pool, or the container is refused at
// creation and the claim must be prepared again.
func TestReloadWhileAClaimedCPUIsOfflineKeepsTheClaim(t *testing.T) {
	f := newFakeRuntime(t, true)
	n := startDRAOn(t, f, desktopDRA)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	n.prepare(t, "uid-1", 0, 2, pod)
	require.Equal(t, "4,12", n.claimCPUs(t, "uid-1"))

	root := f.sysfsRoot(desktopDRA.fixture)
	setOnlineAt(t, root, 12, false)
	require.NoError(t, n.p.checkHotplug(root))
	err := n.p.Reload(reloadConfig(t, n.runningPlugin, desktopOfflineMoved+"dra: {enabled: true}\n"), nil, "test")
	var re *ReloadError
	require.ErrorAs(t, err, &re, "a reload that gives a prepared claim's offline CPU to shared")
	require.Len(t, re.Blockers, 1)
	assert.Equal(t, "DRA claim telco/claim-uid-1/cpus", re.Blockers[0].Who)
	assert.Equal(t, "12", re.Blockers[0].CPUs.String())
	assert.Equal(t, "4-7,13-15", n.p.alloc.Layout().Exclusive.String(), "the old config stays (CPU 12 offline)")
}

// desktopExclusiveByCount is desktop with the exclusive pool given by a
// count; desktopExclusiveByCountIRQ adds IRQ isolation, housekeeping and
// minInfraCPUs: keys under pools that decide no CPU's pool.
const desktopExclusiveByCount = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {count: 8}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`

const desktopExclusiveByCountIRQ = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {count: 8, irqIsolation: optIn, housekeeping: held}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 2}
allowedNamespaces:
  exclusive: [telco]
`

// TestReloadOfPoolKeysThatPlaceNoCPUWhileAHeldCPUIsOfflineIsApplied: CPU 12
// of a running exclusive container is offline. A reload that changes only
// pools.exclusive.irqIsolation / housekeeping / exclusive-non-isolcpus.
// minInfraCPUs cannot change where CPU 12 rejoins (BuildLayout does not
// read them for any CPU's pool), and the CPU lists are identical, yet it was
// refused as if the pools changed.
func TestReloadOfPoolKeysThatPlaceNoCPUWhileAHeldCPUIsOfflineIsApplied(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, testNode{fixture: desktop.fixture, config: desktopExclusiveByCount}, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	// Sanity: the same reload with every CPU online is applied.
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktopExclusiveByCountIRQ), nil, "test"), "log:\n%s", rp.log.String())
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktopExclusiveByCount), nil, "test"), "log:\n%s", rp.log.String())

	setOnline(t, rp, 12, false)
	waitOfflineHeld(t, rp, 1)
	err = rp.p.Reload(reloadConfig(t, rp, desktopExclusiveByCountIRQ), nil, "test")
	if err != nil {
		t.Logf("log: %s", grepLog(rp.log.String(), "CPU 12 is offline"))
	}
	assert.NoError(t, err, "only irqIsolation/housekeeping/minInfraCPUs changed: the pools' CPUs (count 8) are the same")
}

// TestPlacementKeyChangesNamesOnlyKeysThatPlaceCPUs: the keys that tune a
// pool's CPUs are no change of placement, a list written otherwise is the
// same list, and a count or a list of other CPUs is named.
func TestPlacementKeyChangesNamesOnlyKeysThatPlaceCPUs(t *testing.T) {
	load := func(y string) *config.Config {
		cfg, err := config.Parse(strings.NewReader(y), "test")
		require.NoError(t, err)
		return cfg
	}
	base := load(desktopExclusiveByCount)
	assert.Empty(t, placementKeyChanges(base, load(desktopExclusiveByCountIRQ)))
	assert.Empty(t, placementKeyChanges(base, load(strings.Replace(desktopExclusiveByCount, `"2-3,10-11"`, `"2,3,10,11"`, 1))))
	assert.Equal(t, []string{"pools.exclusive.count"}, placementKeyChanges(base, load(strings.Replace(desktopExclusiveByCount, "count: 8", "count: 6", 1))))
	assert.Equal(t, []string{"pools.shared.cpus"}, placementKeyChanges(base, load(strings.Replace(desktopExclusiveByCount, `"2-3,10-11"`, `"2-3,10"`, 1))))
}

// TestReloadWhileAHiddenSiblingIsOfflineKeepsItOutOfShared: a
// hide-hyperthreads container runs on CPU 7 while its sibling 15 is
// offline (docs: the sibling becomes its idle hidden sibling when it comes
// online). A reload giving CPU 15 to shared was applied (offlineBlockers
// looked at Held() only, which has no offline sibling), CPU 15 comes back
// in shared, and the shared pool's members run on the hidden thread of the
// container's core. With 15 online the same reload is refused (15 is in
// the container's Reserved): the outcome must not depend on whether the
// sibling happened to be offline at the reload.
func TestReloadWhileAHiddenSiblingIsOfflineKeepsItOutOfShared(t *testing.T) {
	toShared := `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-14"}
  shared: {cpus: "2-3,10-11,15"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`
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

	err = rp.p.Reload(reloadConfig(t, rp, toShared), nil, "test")
	setOnline(t, rp, 15, true)
	time.Sleep(100 * time.Millisecond)
	_, l := rp.p.Layout()
	st := rp.savedState(t).Containers[hide.Id]
	assert.Error(t, err, "the reload gives the hide-hyperthreads container's offline sibling 15 to shared; after it: shared=%s, hidden sibling %q", l.Shared, st.Reserved)
}

// TestReloadWhileALentCPUIsOfflineIsRefusedWithAnActionableReason: an
// exclusive-non-isolcpus container runs on infra CPU 1 (lent), which goes
// offline. A reload that changes the lists (desktopGrown) is refused, as
// no list names a lent CPU and where it rejoins is not judged here (the
// carving is not redone for offline CPUs), and the reason says what can be
// done: keep the keys that place CPUs as they are, not "list it", which no
// config can.
func TestReloadWhileALentCPUIsOfflineIsRefusedWithAnActionableReason(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	eni, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "1", f.cpus(eni))

	setOnline(t, rp, 1, false)
	waitOfflineHeld(t, rp, 1)
	require.Error(t, rp.p.Reload(reloadConfig(t, rp, desktopGrown), nil, "test"))
	assert.Contains(t, rp.log.String(), "CPU 1 is offline, and which pool it joins when it comes online cannot be checked while it is offline: the new config changes pools.exclusive.cpus, pools.shared.cpus (which place CPUs in pools), and no list names exclusive-non-isolcpus CPUs, so keep those keys as they are; bring it online and reload again")
	assert.NotContains(t, rp.log.String(), "pools (unchanged)")
}
