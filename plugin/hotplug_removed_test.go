package plugin

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// hotRemoveAt takes cpu out of the present and online masks of a fake
// sysfs tree, as a hypervisor's vCPU unplug does, and removes its
// directory.
func hotRemoveAt(t *testing.T, root string, cpu int) {
	t.Helper()
	setOnlineAt(t, root, cpu, false)
	dir := filepath.Join(root, "sys/devices/system/cpu")
	data, err := os.ReadFile(filepath.Join(dir, "present"))
	require.NoError(t, err)
	present, err := cpuset.Parse(string(trimNL(data)))
	require.NoError(t, err)
	writeSysfs(t, filepath.Join(dir, "present"), present.Difference(cpuset.New(cpu)).String())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "cpu"+strconv.Itoa(cpu))))
}

// TestHotRemovedCPUTheConfigNeedsIsReportedAtOnce: a hypervisor unplugs
// vCPU 15, which isolatedCPUs lists and exclusive's count needs. The
// running daemon carries on without it, but the same file is invalid on
// the node as it is now: a reload of it is refused, and the next restart
// refuses to start, so nothing is pinned then (docs/limitations.md). That
// used to show only at the next restart; it is said, as an error naming
// the problems and the way out, when the CPU is removed.
func TestHotRemovedCPUTheConfigNeedsIsReportedAtOnce(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopExclusive12, statePath(f), fastHotplug)
	hotRemoveAt(t, f.sysfsRoot(desktopExclusive12.fixture), 15)
	waitLayout(t, rp, "2-7,10-14")
	require.Eventually(t, func() bool { return strings.Contains(rp.log.String(), "CPU 15 was removed from the node") }, 3*time.Second, 5*time.Millisecond, "log:\n%s", rp.log.String())
	log := grepLog(rp.log.String(), "CPU 15 was removed")
	assert.NotContains(t, log, "level=error", "the config in force still fits: the CPU is remembered")
	assert.Contains(t, log, "it stays in its pools as offline CPU (15 exclusive)")
	assert.Contains(t, log, "a reload of the same config or the next restart lays the pools out the same")
}

// TestCPUHotRemovedWhileOfflineIsReported: the unplug seen in two steps,
// the CPU offline at one read of the masks and gone from the present mask
// at a later one (which leaves the online mask as it was), is reported
// all the same.
func TestCPUHotRemovedWhileOfflineIsReported(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopExclusive12, statePath(f), fastHotplug)
	root := f.sysfsRoot(desktopExclusive12.fixture)
	setOnlineAt(t, root, 15, false)
	waitLayout(t, rp, "2-7,10-14")
	time.Sleep(20 * time.Millisecond)
	assert.NotContains(t, rp.log.String(), "was removed from the node", "offline is not removed")
	hotRemoveAt(t, root, 15)
	require.Eventually(t, func() bool { return strings.Contains(rp.log.String(), "CPU 15 was removed from the node") }, 3*time.Second, 5*time.Millisecond, "log:\n%s", rp.log.String())
}

// TestHotRemovedCPUTheConfigDoesNotNeedIsOnlyFollowed: an unplugged vCPU
// that no list names and no count needs (infra's CPU 9 where the pools
// are lists) changes nothing a restart would lay out: no error.
func TestHotRemovedCPUTheConfigDoesNotNeedIsOnlyFollowed(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	hotRemoveAt(t, f.sysfsRoot(desktop.fixture), 9)
	require.Eventually(t, func() bool { return strings.Contains(rp.log.String(), "CPU 9 was removed from the node") }, 3*time.Second, 5*time.Millisecond)
	assert.Contains(t, rp.log.String(), "(9 infra")
	assert.NotContains(t, rp.log.String(), "level=error")
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktop.config), nil, "SIGHUP"), "the same file reloads")
}

// TestHotRemovedCPUThatMovesTheCarvingIsReported: with the kernel's
// isolated CPUs (no isolatedCPUs key) and a count, an unplugged infra vCPU
// makes no list wrong and the count still fits, but the count carved on
// the smaller node takes other CPUs (2-3,7-9 instead of 2-3,6,8-9): a
// restart would keep the exclusive container on CPU 6 where it runs while
// CPU 6 belongs to infra. That is said when the CPU is removed.
func TestHotRemovedCPUThatMovesTheCarvingIsReported(t *testing.T) {
	node := testNode{fixture: "kubelet-dual-socket-ht", config: `
reservedCPUs: "0"
pools:
  exclusive: {count: 5}
`}
	f := newFakeRuntime(t, true)
	root := f.sysfsRoot(node.fixture)
	require.NoError(t, os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/isolated"), []byte("2-11\n"), 0o644))
	rp := startPlugin(t, f, node, statePath(f), fastHotplug)
	ex, _ := layoutNow(rp)
	require.Equal(t, "2-3,6,8-9", ex)
	hotRemoveAt(t, root, 4)
	require.Eventually(t, func() bool { return strings.Contains(rp.log.String(), "CPU 4 was removed from the node") }, 3*time.Second, 5*time.Millisecond, "log:\n%s", rp.log.String())
	assert.NotContains(t, rp.log.String(), "level=error")
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, node.config), nil, "SIGHUP"), "the same file reloads")
	ex, _ = layoutNow(rp)
	assert.Equal(t, "2-3,6,8-9", ex, "the count is carved on the node with CPU 4 put back, as before")
}

// TestHotRemovedCPUWorkaroundKeepsThePoolsAcrossARestart: the way out the
// error and docs/limitations.md give, the CPU taken out of every list and
// the pools given by the CPUs they run on now, is applied by a reload
// without moving anyone, and the restart after it lays out the same pools
// and keeps every container where it runs.
func TestHotRemovedCPUWorkaroundKeepsThePoolsAcrossARestart(t *testing.T) {
	node := testNode{fixture: "kubelet-dual-socket-ht", config: `
isolatedCPUs: "2-11"
reservedCPUs: "0"
pools:
  exclusive: {count: 5}
allowedNamespaces:
  exclusive: [telco]
`}
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, node, statePath(f), fastHotplug)
	ran := map[string]string{}
	var ids []string
	for _, name := range []string{"exa", "exb", "exc", "exd", "exe"} {
		pod := f.runPod(podSpec{name: name, namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
		ctr, _, err := f.createContainer(pod, "c", 1000)
		require.NoError(t, err)
		ran[ctr.Id] = f.cpus(ctr)
		ids = append(ids, ctr.Id)
	}
	hotRemoveAt(t, f.sysfsRoot(node.fixture), 4)
	require.Eventually(t, func() bool { return strings.Contains(rp.log.String(), "CPU 4 was removed from the node") }, 3*time.Second, 5*time.Millisecond)
	ex, infra := layoutNow(rp)
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, node.config), nil, "SIGHUP"), "the file as it is still fits: CPU 4 is remembered")

	edited := testNode{fixture: node.fixture, config: `
isolatedCPUs: "2-3,5-11"
reservedCPUs: "0"
pools:
  exclusive: {cpus: "2-3,6,8-9"}
allowedNamespaces:
  exclusive: [telco]
`}
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, edited.config), nil, "SIGHUP"))
	rp.stop()
	second := startPlugin(t, f, edited, statePath(f), fastHotplug)
	ex2, infra2 := layoutNow(second)
	assert.Equal(t, ex, ex2)
	assert.Equal(t, infra, infra2)
	st := second.savedState(t)
	for _, id := range ids {
		require.Contains(t, st.Containers, id)
		assert.Equal(t, ran[id], st.Containers[id].CPUs, "container %s", id)
	}
	assert.NotContains(t, second.log.String(), "outside pool")
}

// TestHotRemovedOwnedCPUWorkaroundReloadIsApplied: vCPU 12 of a
// running exclusive container is hot-removed. The daemon logs an error
// telling to "remove CPUs 12 from its lists and give the pools by the CPUs
// they run on now ... and reload" (docs/limitations.md says the same, and
// that "That reload moves no one"). The reload of exactly that edit is
// refused by offlineBlockers: the container still owns CPU 12, which is
// not online and which the new config cannot list (it does not exist:
// listing it is invalid). Its reason says "bring it online and reload
// again" — impossible for a removed CPU. The only way left is a restart.
func TestHotRemovedOwnedCPUWorkaroundReloadIsApplied(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))

	hotRemoveAt(t, f.sysfsRoot(desktop.fixture), 12)
	require.Eventually(t, func() bool { return strings.Contains(rp.log.String(), "CPU 12 was removed from the node") }, 3*time.Second, 5*time.Millisecond, "log:\n%s", rp.log.String())
	require.Contains(t, rp.log.String(), "(12 exclusive)")
	edited := `
isolatedCPUs: "2-7,10-11,13-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,13-15"}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`
	err = rp.p.Reload(reloadConfig(t, rp, edited), nil, "test")
	if err != nil {
		t.Logf("log: %s", grepLog(rp.log.String(), "CPU 12"))
	}
	assert.NoError(t, err, "the edit the error and docs/limitations.md prescribe")
}

// grepLog keeps the lines of log that contain s: a failure shows what
// was said about one CPU or container, not the whole log.
func grepLog(log, s string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestHotRemovedOwnedCPURestartKeepsTheContainerWhereItRuns: the other
// way out docs/limitations.md gives (edit the config to the node as it is,
// then restart: "the restart after it lays out the same pools", and "a
// restart keeps exclusive containers where they run"). A running exclusive
// container on CPUs 4,12 whose vCPU 12 was hot-removed runs on CPU 4 (the
// kernel's doing). At the restart, 12 is dropped from both the state's
// and the runtime's cpuset, the container is said to run "on every CPU",
// its CPUs "cannot be restored", and it is placed again on CPUs 5,13: a
// running latency-sensitive container moved off the CPU it runs on.
func TestHotRemovedOwnedCPURestartKeepsTheContainerWhereItRuns(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	hotRemoveAt(t, f.sysfsRoot(desktop.fixture), 12)
	require.Eventually(t, func() bool { return strings.Contains(rp.log.String(), "CPU 12 was removed from the node") }, 3*time.Second, 5*time.Millisecond)
	edited := `
isolatedCPUs: "2-7,10-11,13-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,13-15"}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`
	rp.stop()
	second := startPlugin(t, f, testNode{fixture: desktop.fixture, config: edited}, statePath(f), fastHotplug)
	st := second.savedState(t).Containers[fwd.Id]
	assert.Contains(t, []string{"4", "4,12"}, st.CPUs, "the container runs on CPU 4; log:\n%s", grepLog(second.log.String(), "fwd"))
	assert.NotContains(t, second.log.String(), "runs on every CPU")
}
