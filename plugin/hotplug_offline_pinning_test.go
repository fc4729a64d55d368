package plugin

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
)

// CPU hotplug must never leave a container unable to start or pinned only
// to offline CPUs: pinning never depends on every CPU being online.

// a container of the cpupool.dev/exclusive resource whose CPU
// goes offline cannot run again in its pod while the CPU is offline: the
// kubelet restarts it with the same allocation, and the plugin refuses it
// ("outside exclusive as now configured"), whereas a running container keeps
// its offline CPU and the annotation route re-places. Pinning must not
// depend on every CPU being online: the restart should be pinned to the
// allocation's online CPUs (the offline one kept, as a running container
// keeps it).
func TestHotplugKubeletContainerRestartsWithItsCPUOffline(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f), fastHotplug)
	env := grantEnv(t, rp.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	ctr, resp, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)

	setOnline(t, rp, 14, false)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rp.p.metrics.offlineHeld) == 1 }, 3*time.Second, 5*time.Millisecond)

	// The container crashes; the kubelet restarts it with its cached Allocate response.
	f.exitContainer(ctr, 137)
	f.removeContainer(ctr)
	again, resp, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err, "restart of a resource-route container with one CPU offline")
	assert.Equal(t, "6", resp.Adjust.Linux.Resources.Cpu.Cpus)
	// It keeps CPU 14, as a running container keeps it, and gets it back.
	rp.p.mu.Lock()
	a, _ := rp.p.alloc.Get(again.Id)
	rp.p.mu.Unlock()
	assert.Equal(t, "6,14", a.CPUs.String(), "the record keeps the offline CPU")
	setOnline(t, rp, 14, true)
	assert.Eventually(t, func() bool { return f.cpus(again) == "6,14" }, 3*time.Second, 5*time.Millisecond, "runs on %s once 14 is back", f.cpus(again))
}

// every CPU of the shared pool goes offline (shared: {count: 2}
// is 2,10) under a running shared container. Rebase skips a pool that is
// empty, so the container's record, and every update it is sent, still
// names only offline CPUs: the kernel then runs it on its parent's CPUs
// (v2: the effective set falls back to the parent's; v1: its tasks move to
// the parent cpuset), exclusive ones included. It must be given online
// CPUs the plugin chooses (e.g. infra) while its pool has none.
func TestHotplugSharedPoolAllOfflineRunsOnInfra(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopCounted, statePath(f), fastHotplug)
	require.Equal(t, "2,10", sharedNow(rp))
	pod := f.runPod(podSpec{name: "web", annotations: map[string]string{"pool.cpupool.dev/pod": "shared"}})
	web, _, err := f.createContainer(pod, "app", 500)
	require.NoError(t, err)
	require.Equal(t, "2,10", f.cpus(web))

	setOnline(t, rp, 10, false)
	require.Eventually(t, func() bool { return f.cpus(web) == "2" }, 3*time.Second, 5*time.Millisecond, "partial offline is followed")
	setOnline(t, rp, 2, false)
	require.Eventually(t, func() bool { return sharedNow(rp) == "" }, 3*time.Second, 5*time.Millisecond)
	rp.p.mu.Lock()
	infra := rp.p.alloc.PoolCPUs("infra")
	a, _ := rp.p.alloc.Get(web.Id)
	rp.p.mu.Unlock()
	require.False(t, infra.IsEmpty())
	assert.Equal(t, infra.String(), a.Cpuset().String(), "the shared member runs on infra while its pool is offline")
	assert.Eventually(t, func() bool { return f.cpus(web) == infra.String() }, 3*time.Second, 5*time.Millisecond, "runtime: %s", f.cpus(web))
	assert.Contains(t, rp.log.String(), "every CPU of pool shared is offline: its 1 container runs on CPUs "+infra.String()+" (pool infra)")

	setOnline(t, rp, 2, true)
	assert.Eventually(t, func() bool { return f.cpus(web) == "2" }, 3*time.Second, 5*time.Millisecond, "back on its pool: %s", f.cpus(web))
}

// cgroup v1: the kernel empties a cpuset whose CPUs all went offline and
// never refills it. The shared container must be pinned to its pool again
// when the pool's CPUs come back (it moved to infra meanwhile, and back).
func TestHotplugSharedPoolBackOnlineRepinned(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopCounted, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "web", annotations: map[string]string{"pool.cpupool.dev/pod": "shared"}})
	web, _, err := f.createContainer(pod, "app", 500)
	require.NoError(t, err)
	require.Equal(t, "2,10", f.cpus(web))
	setOnline(t, rp, 2, false)
	setOnline(t, rp, 10, false)
	require.Eventually(t, func() bool { return sharedNow(rp) == "" }, 3*time.Second, 5*time.Millisecond)
	f.setCPUs(web, "") // cgroup v1: the kernel emptied the cpuset, the tasks went to the parent
	setOnline(t, rp, 2, true)
	setOnline(t, rp, 10, true)
	require.Eventually(t, func() bool { return sharedNow(rp) == "2,10" }, 3*time.Second, 5*time.Millisecond)
	assert.Eventually(t, func() bool { return f.cpus(web) == "2,10" }, time.Second, 5*time.Millisecond, "shared container runs on %q after its pool came back", f.cpus(web))
}

// an exclusive container that also runs on the shared pool
// keeps its offline CPU 12 in its record; when the shared pool then
// changes (CPU 3 goes offline), the update the plugin sends names CPU 12.
// cgroup v1 refuses a cpuset.cpus naming an offline CPU (it must be within
// the parent's, which lost it), and the update is sent with IgnoreFailure:
// on v1 the container silently keeps its old cpuset.
func TestHotplugUpdateLeavesOutOfflineCPUs(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "2-4,10-12", f.cpus(fwd))
	setOnline(t, rp, 12, false)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rp.p.metrics.offlineHeld) == 1 }, 3*time.Second, 5*time.Millisecond)
	setOnline(t, rp, 3, false)
	require.Eventually(t, func() bool { return !cpusParsed(t, f.cpus(fwd)).Contains(3) }, 3*time.Second, 5*time.Millisecond, "%s", f.cpus(fwd))
	assert.False(t, cpusParsed(t, f.cpus(fwd)).Contains(12), "update sent with offline CPU 12: %s", f.cpus(fwd))
}

func cpusParsed(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	require.NoError(t, err)
	return set
}

// TestRunnableLeavesOutOfflineCPUs: what a container is sent names no
// offline CPU while one of its CPUs is online, and is never empty.
func TestRunnableLeavesOutOfflineCPUs(t *testing.T) {
	online := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15)
	for _, c := range []struct{ cpus, want string }{
		{"4,12", "4"}, {"2-4,10-12", "2-4,10-11"}, {"4", "4"}, {"12", "12"}, {"", ""},
	} {
		assert.Equal(t, c.want, runnable(cpusParsed(t, c.cpus), online).String(), "cpus %s", c.cpus)
	}
	a := allocator.Assignment{ID: "x", Pool: "exclusive", CPUs: cpusParsed(t, "4,12"), WithShared: true, Shared: cpusParsed(t, "2-3,10-11")}
	assert.Equal(t, "2-4,10-11", cpuUpdate(a, online, false).GetLinux().GetResources().GetCpu().GetCpus())
	a.Shared = cpuset.New()
	a.CPUs = cpusParsed(t, "12")
	assert.Equal(t, "12", cpuUpdate(a, online, false).GetLinux().GetResources().GetCpu().GetCpus(), "never an empty cpuset")
}

// cgroup v1: while every CPU of both shared and infra is offline a shared
// member has nothing else to run on, so its record stays on its pool's
// CPUs, and v1 emptied its cpuset. When they come back the record is
// unchanged, so no pool change sends it anything: giveBack must, for
// members as for exclusive containers.
func TestHotplugMemberGivenBackItsUnchangedCPUs(t *testing.T) {
	node := testNode{fixture: "desktop-8c16t", config: `
isolatedCPUs: "2-7,10-15"
pools:
  exclusive: {cpus: "3-7,11-15"}
  shared: {cpus: "2,10"}
`}
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, node, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "web", annotations: map[string]string{"pool.cpupool.dev/pod": "shared"}})
	web, _, err := f.createContainer(pod, "app", 500)
	require.NoError(t, err)
	require.Equal(t, "2,10", f.cpus(web))
	for _, cpu := range []int{0, 1, 8, 9, 2, 10} {
		setOnline(t, rp, cpu, false)
	}
	require.Eventually(t, func() bool { _, infra := layoutNow(rp); return sharedNow(rp) == "" && infra == "" }, 3*time.Second, 5*time.Millisecond)
	assert.Contains(t, rp.log.String(), "every CPU of pools shared and infra is offline: their 1 container keeps its offline CPUs")
	f.setCPUs(web, "") // cgroup v1: the kernel emptied the cpuset
	// 2 and 10 come back (to infra: the config cannot be laid out without
	// infra's CPUs; the shared member runs there, on them, again).
	setOnline(t, rp, 2, true)
	setOnline(t, rp, 10, true)
	require.Eventually(t, func() bool { _, infra := layoutNow(rp); return infra == "2,10" }, 3*time.Second, 5*time.Millisecond)
	rp.p.mu.Lock()
	a, _ := rp.p.alloc.Get(web.Id)
	rp.p.mu.Unlock()
	require.Equal(t, "2,10", a.Cpuset().String(), "the record did not change")
	assert.Eventually(t, func() bool { return f.cpus(web) == "2,10" }, time.Second, 5*time.Millisecond, "shared container runs on %q after its CPUs came back", f.cpus(web))
}

// A CPU that goes offline and comes back between two reads of the online
// mask (every 250 ms) leaves the mask as it was, so the poll never sees
// it; on cgroup v1 the kernel dropped the CPU from the exclusive
// container's cpuset.cpus and does not put it back (f.setCPUs stands for
// v1's loss, as in TestHotplugHeldCPU). The kernel's uevents say it: the
// CPU is given back on its "online", whether or not the mask changed.
func TestHotplugFastOfflineOnlineFlipGivenBack(t *testing.T) {
	f := newFakeRuntime(t, true)
	events := make(chan cpuUevent)
	startPlugin(t, f, desktop, statePath(f), func(p *Plugin) { p.hotplug.uevents = events }) // the shipped interval
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	// The flip, between two reads of the mask: only the uevents show it.
	f.setCPUs(fwd, "4") // cgroup v1 drops it
	events <- cpuUevent{cpu: 12, online: false}
	events <- cpuUevent{cpu: 12, online: true}
	assert.Eventually(t, func() bool { return f.cpus(fwd) == "4,12" }, 2*time.Second, 10*time.Millisecond,
		"fwd runs on %s after CPU 12 went offline and came back", f.cpus(fwd))

	// Events were lost (the socket's buffer overflowed): every online CPU
	// is given back.
	f.setCPUs(fwd, "12")
	events <- cpuUevent{cpu: -1, online: true}
	assert.Eventually(t, func() bool { return f.cpus(fwd) == "4,12" }, 2*time.Second, 10*time.Millisecond, "fwd runs on %s", f.cpus(fwd))
}

// TestParseCPUUevent: the kernel's CPU online/offline messages are read;
// anything else, and a malformed device path, is not.
func TestParseCPUUevent(t *testing.T) {
	msg := func(header string, env ...string) []byte {
		b := []byte(header)
		for _, kv := range env {
			b = append(append(b, 0), kv...)
		}
		return append(b, 0)
	}
	for _, c := range []struct {
		msg  []byte
		want cpuUevent
		ok   bool
	}{
		{msg("online@/devices/system/cpu/cpu12", "ACTION=online", "DEVPATH=/devices/system/cpu/cpu12", "SUBSYSTEM=cpu", "SEQNUM=4242"), cpuUevent{12, true}, true},
		{msg("offline@/devices/system/cpu/cpu0", "ACTION=offline", "SUBSYSTEM=cpu"), cpuUevent{0, false}, true},
		{msg("online@/devices/system/memory/memory3", "SUBSYSTEM=memory"), cpuUevent{}, false},
		{msg("online@/devices/system/memory/12"), cpuUevent{}, false}, // as long as a CPU's path
		{msg("add@/devices/system/cpu/cpu3", "SUBSYSTEM=cpu"), cpuUevent{}, false},
		{msg("change@/devices/system/cpu/cpufreq/policy3"), cpuUevent{}, false},
		{msg("online@/devices/system/cpu/cpu"), cpuUevent{}, false},
		{msg("online@/devices/system/cpu/cpu12/cache"), cpuUevent{}, false},
		{msg("online@/devices/system/cpu/cpu123456789"), cpuUevent{}, false},
		{msg("libudev"), cpuUevent{}, false},
		{nil, cpuUevent{}, false},
	} {
		got, ok := parseCPUUevent(c.msg)
		assert.Equal(t, c.ok, ok, "%q", c.msg)
		assert.Equal(t, c.want, got, "%q", c.msg)
	}
}

// TestCPUUeventsListens: the kernel's uevent socket opens as the daemon's
// user (no capability is needed to hear the kernel's messages) and the
// listener ends with its context.
func TestCPUUeventsListens(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cpuUevents(ctx, make(chan cpuUevent)) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * ueventPoll):
		t.Fatal("the listener did not end with its context")
	}
}
