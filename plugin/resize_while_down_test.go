package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setRequest is the kubelet's in-place resize as the runtime applies it
// without the plugin: the new shares, the cpuset left as it was (the
// kubelet sets none).
func (f *fakeRuntime) setRequest(ctr *api.Container, milli int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ctr.Linux.Resources.Cpu.Shares = api.UInt64(uint64(milli * 1024 / 1000))
}

// TestResizeAppliedWhilePluginWasDownIsApplied (review rvJ #5): the
// kubelet resized an exclusive container in place from 2 to 4 CPUs while
// the plugin was down; the runtime applied the new shares without it and
// kept the cpuset. Before, the restart kept the container on 2 CPUs with
// the record's 2000m and said nothing, and the kubelet, which believes the
// resize done, never sends it again. Now it grows in place by the rules of
// a live resize: it keeps the CPUs it runs on and gets 2 more.
func TestResizeAppliedWhilePluginWasDownIsApplied(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	before := mustParse(f.cpus(ctr))
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setRequest(ctr, 4000)

	second := startPlugin(t, f, xeon, statePath(f))
	a, ok := second.p.alloc.Get(ctr.GetId())
	require.True(t, ok)
	t.Logf("after restart: %s (%dm), runtime %s", a.CPUs, a.MilliCPU, f.cpus(ctr))
	assert.Equal(t, 4, a.CPUs.Size(), "grown to the runtime's request")
	assert.Equal(t, int64(4000), a.MilliCPU)
	assert.True(t, before.IsSubsetOf(a.CPUs), "it keeps the CPUs it runs on (%s)", before)
	assert.Equal(t, a.CPUs.String(), f.cpus(ctr), "the runtime got the grown set")
	assert.Equal(t, int64(4000), second.savedState(t).Containers[ctr.GetId()].MilliCPU, "recorded")
	assert.Contains(t, second.log.String(), "4000m")
	assert.Equal(t, 1.0, testutil.ToFloat64(second.p.metrics.resizes.WithLabelValues("exclusive", "grown")))
}

// TestShrinkAppliedWhilePluginWasDownGivesBackTheAddedCPUs: a container
// grown live to 4 CPUs is shrunk back to 2 by the kubelet while the plugin
// is down. The restart shrinks it as a live resize would: it gives back
// the CPUs the grow added and keeps the ones it was created with, and the
// CPUs given back are free for others.
func TestShrinkAppliedWhilePluginWasDownGivesBackTheAddedCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	original := f.cpus(ctr)
	_, err = f.updateContainer(pod, ctr, 4000)
	require.NoError(t, err)
	grown := mustParse(f.cpus(ctr))
	require.Equal(t, 4, grown.Size())
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setRequest(ctr, 2000)

	second := startPlugin(t, f, xeon, statePath(f))
	a, ok := second.p.alloc.Get(ctr.GetId())
	require.True(t, ok)
	assert.Equal(t, original, a.CPUs.String(), "back on the CPUs it was created with")
	assert.Equal(t, original, f.cpus(ctr))
	assert.Equal(t, int64(2000), a.MilliCPU)
	given := grown.Difference(mustParse(original))
	assert.True(t, given.IsSubsetOf(second.p.alloc.FreeCPUs(a.Pool)), "the CPUs given back (%s) are free", given)
	assert.Equal(t, 1.0, testutil.ToFloat64(second.p.metrics.resizes.WithLabelValues("exclusive", "shrunk")))
}

// TestResizeWhilePluginWasDownThatCannotBeAppliedIsReported: a
// cpupool.dev/exclusive container's CPUs are the kubelet's devices, and a
// live resize of it is refused; one the runtime applied while the plugin
// was down cannot be applied either, and is said loudly (log, the refused
// resize count), not dropped in silence. It stays on its devices.
func TestResizeWhilePluginWasDownThatCannotBeAppliedIsReported(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, first.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	ctr, _, err := f.createWithEnv(pod, "app", 2000, env)
	require.NoError(t, err)
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setRequest(ctr, 4000)

	second := startPlugin(t, f, desktopKubelet, statePath(f))
	a, ok := second.p.alloc.Get(ctr.GetId())
	require.True(t, ok)
	assert.Equal(t, "6,14", a.CPUs.String(), "it stays on its devices")
	assert.Equal(t, "6,14", f.cpus(ctr))
	assert.Equal(t, int64(2000), a.MilliCPU, "its record keeps its size")
	t.Logf("log: %s", second.log.String())
	assert.Contains(t, second.log.String(), "resize to 4000m refused")
	assert.Equal(t, 1.0, testutil.ToFloat64(second.p.metrics.resizes.WithLabelValues("exclusive", "refused")))
}
