package plugin

import (
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
	require.Eventually(t, func() bool { return !mustCPUs(t, f.cpus(fwd)).Contains(3) }, 3*time.Second, 5*time.Millisecond, "%s", f.cpus(fwd))
	assert.False(t, mustCPUs(t, f.cpus(fwd)).Contains(12), "update sent with offline CPU 12: %s", f.cpus(fwd))
}

func mustCPUs(t *testing.T, s string) cpuset.CPUSet {
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
		assert.Equal(t, c.want, runnable(mustCPUs(t, c.cpus), online).String(), "cpus %s", c.cpus)
	}
	a := allocator.Assignment{ID: "x", Pool: "exclusive", CPUs: mustCPUs(t, "4,12"), WithShared: true, Shared: mustCPUs(t, "2-3,10-11")}
	assert.Equal(t, "2-4,10-11", cpuUpdate(a, online, false).GetLinux().GetResources().GetCpu().GetCpus())
	a.Shared = cpuset.New()
	a.CPUs = mustCPUs(t, "12")
	assert.Equal(t, "12", cpuUpdate(a, online, false).GetLinux().GetResources().GetCpu().GetCpus(), "never an empty cpuset")
}
