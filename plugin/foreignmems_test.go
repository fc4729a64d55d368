package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestForeignMemsAtSynchronize: a running container whose mems someone
// else changed (the kubelet's Memory Manager) is warned about, counted, and
// kept with its mems, its memory counted there; a container with the mems
// the plugin wrote is not warned about.
func TestForeignMemsAtSynchronize(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, vmHugePages, statePath(f))
	withHugePages(f, 16)
	a, _, err := f.createContainer(exclusivePod(f, "a"), "dpdk", 1000)
	require.NoError(t, err)
	b, _, err := f.createContainer(exclusivePod(f, "b"), "dpdk", 1000)
	require.NoError(t, err)
	require.Equal(t, "1", b.Linux.Resources.Cpu.Mems)

	rp.stop()
	setRuntimeMems(f, a, "0-1")
	rp = startPlugin(t, f, vmHugePages, statePath(f))
	log := rp.log.String()
	assert.Contains(t, log, "container default/a/dpdk runs with mems 0-1, the plugin wrote 1")
	assert.Contains(t, log, "set the kubelet's memoryManagerPolicy to None")
	assert.NotContains(t, log, "/b/dpdk runs with mems", "b runs with the mems the plugin wrote")
	assert.Equal(t, 1.0, testutil.ToFloat64(rp.p.metrics.foreignMems.WithLabelValues(foreignAtSynchronize)))
	saved := rp.savedState(t).Containers[a.Id]
	assert.Equal(t, "0-1", saved.Mems, "kept as it runs")
	assert.Equal(t, "1:memory=67108864,2048kB=16", saved.Memory)

	// Its mems are the plugin's record now: the next restart is quiet.
	rp.stop()
	rp = startPlugin(t, f, vmHugePages, statePath(f))
	assert.NotContains(t, rp.log.String(), "runs with mems")
	assert.Equal(t, 0.0, testutil.ToFloat64(rp.p.metrics.foreignMems.WithLabelValues(foreignAtSynchronize)))
}

// TestForeignMemsAtUpdate: an update that asks a pinned container for
// other mems (the Memory Manager's Static policy writes its own) is
// answered with the plugin's cpuset and mems, warned about and counted
// once; an update with the plugin's mems, or none, passes quietly.
func TestForeignMemsAtUpdate(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, vmHugePages, statePath(f))
	withHugePages(f, 16)
	pod := exclusivePod(f, "a")
	a, _, err := f.createContainer(pod, "dpdk", 1000)
	require.NoError(t, err)
	cpus := a.Linux.Resources.Cpu.Cpus

	update := func(mems string) *api.UpdateContainerResponse {
		resp, err := f.r.UpdateContainer(t.Context(), &api.UpdateContainerRequest{Pod: pod, Container: a,
			LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: cpus, Mems: mems, Shares: api.UInt64(1024)}}})
		require.NoError(t, err)
		return resp
	}
	for _, mems := range []string{"1", ""} { // the plugin's own, none
		for _, u := range update(mems).Update {
			assert.Empty(t, u.GetLinux().GetResources().GetCpu().GetMems(), "asked %q: no update", mems)
		}
	}
	assert.NotContains(t, rp.log.String(), "keeping mems")

	resp := update("0")
	require.Len(t, resp.Update, 1)
	require.NotNil(t, resp.Update[0])
	assert.Equal(t, "1", resp.Update[0].Linux.Resources.Cpu.Mems, "the plugin's mems, where its memory is counted")
	assert.Equal(t, cpus, resp.Update[0].Linux.Resources.Cpu.Cpus)
	assert.Contains(t, rp.log.String(), "container default/a/dpdk: keeping mems 1, which the plugin wrote, instead of the requested 0")
	assert.Contains(t, rp.log.String(), "memoryManagerPolicy to None")
	update("0")
	assert.Equal(t, 1.0, testutil.ToFloat64(rp.p.metrics.foreignMems.WithLabelValues(foreignAtUpdate)), "once per container")
}

// TestForeignMemsAtCreation: a container whose spec sets its own mems (the
// Memory Manager's Static policy writes them into the CRI config) gets the
// plugin's, with a warning and a count; one whose spec sets the plugin's,
// or none, gets no warning.
func TestForeignMemsAtCreation(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, vmHugePages, statePath(f))
	specMems := "0"
	f.mu.Lock()
	f.dress = func(ctr *api.Container) {
		ctr.Linux.Resources.HugepageLimits = []*api.HugepageLimit{{PageSize: "2MB", Limit: 8 << 21}}
		ctr.Linux.Resources.Cpu.Mems = specMems
	}
	f.mu.Unlock()
	_, resp, err := f.createContainer(exclusivePod(f, "a"), "dpdk", 1000)
	require.NoError(t, err)
	assert.Equal(t, "1", resp.GetAdjust().GetLinux().GetResources().GetCpu().GetMems(), "the plugin's mems, where its hugepages are")
	assert.Contains(t, rp.log.String(), "container default/a/dpdk: its spec sets mems 0 (the kubelet's Memory Manager?); the plugin pins mems 1 instead")
	assert.Equal(t, 1.0, testutil.ToFloat64(rp.p.metrics.foreignMems.WithLabelValues(foreignAtCreate)))

	for _, mems := range []string{"1", ""} {
		f.mu.Lock()
		specMems = mems
		f.mu.Unlock()
		_, _, err := f.createContainer(exclusivePod(f, "b"+mems), "dpdk", 1000)
		require.NoError(t, err)
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(rp.p.metrics.foreignMems.WithLabelValues(foreignAtCreate)), "no count for the plugin's mems or none")
	assert.NotContains(t, rp.log.String(), "/b1/dpdk: its spec sets mems")
}
