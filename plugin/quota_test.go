package plugin

import (
	"os"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func quotaOf(r *api.LinuxResources) (int64, bool) {
	q := r.GetCpu().GetQuota()
	return q.GetValue(), q != nil
}

func TestCPUQuotaOfExclusiveContainers(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "pool.cpupool.dev/container.app": "infra",
		"disable-cpu-quota.cpupool.dev/container.throttled": "false"}})

	fwd, resp, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	q, set := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.True(t, set)
	assert.Equal(t, int64(-1), q, "no CFS quota on exclusive CPUs by default")

	_, resp, err = f.createContainer(pod, "app", 2000)
	require.NoError(t, err)
	_, set = quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.False(t, set, "infra containers keep the kubelet's quota")

	throttled, resp, err := f.createContainer(pod, "throttled", 2000)
	require.NoError(t, err)
	_, set = quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.False(t, set, "the annotation keeps the quota")

	// The kubelet sets the quota again with every update; it stays lifted,
	// on a resize too.
	up, err := f.updateContainer(pod, fwd, 2000)
	require.NoError(t, err)
	q, set = quotaOf(updateFor(up, fwd.Id).GetLinux().GetResources())
	assert.True(t, set)
	assert.Equal(t, int64(-1), q)
	up, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, fwd.Id).GetLinux().GetResources())
	assert.Equal(t, int64(-1), q, "a resize keeps the quota lifted")
	up, err = f.updateContainer(pod, throttled, 4000)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, throttled.Id).GetLinux().GetResources())
	assert.Equal(t, int64(400000), q, "the kubelet's quota for the new limit")

	// Remembered across a restart.
	rp.stop()
	startPlugin(t, f, xeon, statePath(f))
	up, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, fwd.Id).GetLinux().GetResources())
	assert.Equal(t, int64(-1), q)

	bad := f.runPod(podSpec{name: "bad", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "disable-cpu-quota.cpupool.dev": "maybe"}})
	_, _, err = f.createContainer(bad, "c", 1000)
	assert.ErrorContains(t, err, `annotation disable-cpu-quota.cpupool.dev="maybe": not a boolean; use true or false`)
}

func TestCPUQuotaKeptWhenConfigured(t *testing.T) {
	f := newFakeRuntime(t, false)
	node := xeon
	node.config += "allocation: {disableCPUQuota: false}\n"
	startPlugin(t, f, node, statePath(f))
	pod := f.runPod(podSpec{name: "p", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "disable-cpu-quota.cpupool.dev/container.lifted": "true"}})
	_, resp, err := f.createContainer(pod, "kept", 1000)
	require.NoError(t, err)
	_, set := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.False(t, set)
	_, resp, err = f.createContainer(pod, "lifted", 1000)
	require.NoError(t, err)
	q, _ := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.Equal(t, int64(-1), q)
}

// TestRunWarnsAboutASharedPoolOnDomainIsolatedCPUs: the xeon fixture's
// isolcpus= has the domain flag, and its config a shared pool of 8.
func TestRunWarnsAboutASharedPoolOnDomainIsolatedCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, xeon, statePath(f))
	assert.Contains(t, rp.log.String(), "config: warning: pools.shared: CPUs")
	assert.Contains(t, rp.log.String(), "taken out of the scheduler's load balancing")
}

// TestCPUQuotaLiftedForContainersAdoptedOnSynchronize: a container the
// state does not know (the state was lost) still gets its quota lifted.
func TestCPUQuotaLiftedForContainersAdoptedOnSynchronize(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	first.stop()
	require.NoError(t, os.Remove(statePath(f)))
	f.mu.Lock()
	fwd.Linux.Resources.Cpu.Quota = api.Int64(200000) // as the kubelet set it
	f.mu.Unlock()

	startPlugin(t, f, xeon, statePath(f))
	f.mu.Lock()
	defer f.mu.Unlock()
	var found bool
	for _, u := range f.syncUpdates {
		if u.GetContainerId() == fwd.Id {
			found = true
			q, _ := quotaOf(u.GetLinux().GetResources())
			assert.Equal(t, int64(-1), q)
			assert.Equal(t, fwd.Linux.Resources.Cpu.Cpus, u.GetLinux().GetResources().GetCpu().GetCpus(), "kept where it runs")
		}
	}
	assert.True(t, found, "Synchronize lifts the adopted container's quota")
}

// TestCPUQuotaLiftedForResourceRoute: a Guaranteed pod of the resource
// that requests cpu: 10m, as docs/kubernetes.md suggests, would be throttled to 1%
// of one CPU while it owns two. Its quota is lifted at creation, stays
// lifted on the kubelet's updates and across a restart, and is kept where
// the annotation keeps it: the same rule as for annotated containers and
// containers adopted at Synchronize.
func TestCPUQuotaLiftedForResourceRoute(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "guaranteed",
		annotations: map[string]string{"disable-cpu-quota.cpupool.dev/container.throttled": "false"}})
	app, resp, err := f.createWithEnv(pod, "app", 10, grantEnv(t, rp.p, "6", "14"))
	require.NoError(t, err)
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	q, set := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.True(t, set, "the resource route lifts the quota, as the annotation route does")
	assert.Equal(t, int64(-1), q)
	up, err := f.updateContainer(pod, app, 10)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, app.Id).GetLinux().GetResources())
	assert.Equal(t, int64(-1), q, "the kubelet's update does not bring the quota back")

	_, resp, err = f.createWithEnv(pod, "throttled", 10, grantEnv(t, rp.p, "7"))
	require.NoError(t, err)
	_, set = quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.False(t, set, "the annotation keeps the quota")

	rp.stop()
	startPlugin(t, f, desktopKubelet, statePath(f))
	up, err = f.updateContainer(pod, app, 10)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, app.Id).GetLinux().GetResources())
	assert.Equal(t, int64(-1), q, "remembered across a restart")
}

// TestCPUQuotaLiftedWhenSynchronizeRepins: a remembered exclusive container
// that the runtime created without the plugin's adjustment (a kill between
// the decision and the reply) runs unpinned with the kubelet's quota;
// Synchronize pins it again and lifts the quota in the same update, as for
// a container it adopts, and lifts the quota the kubelet gave back to a
// correctly pinned one while the plugin was down.
func TestCPUQuotaLiftedWhenSynchronizeRepins(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	unpinned, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	pinned, _, err := f.createContainer(pod, "rx", 1000)
	require.NoError(t, err)
	cpus := f.cpus(unpinned)
	first.stop()
	f.mu.Lock()
	unpinned.Linux.Resources.Cpu.Cpus = ""
	unpinned.Linux.Resources.Cpu.Quota = api.Int64(200000)
	pinned.Linux.Resources.Cpu.Quota = api.Int64(100000)
	f.mu.Unlock()

	startPlugin(t, f, xeon, statePath(f))
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, cpus, unpinned.Linux.Resources.Cpu.Cpus, "pinned again on its CPUs")
	assert.Equal(t, int64(-1), unpinned.Linux.Resources.Cpu.Quota.GetValue(), "and its quota lifted")
	assert.Equal(t, int64(-1), pinned.Linux.Resources.Cpu.Quota.GetValue())
}
