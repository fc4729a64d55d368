package plugin

import (
	"fmt"
	"strings"
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

// TestResizeAppliedWhilePluginWasDownIsApplied: the
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

// TestRestartAppliesShrinksBeforeGrows: while the plugin was down the
// kubelet shrank pod b's container from 4 to 2 CPUs and grew pod a's from
// 2 to 6; the runtime applied both (shares only). The exclusive pool (8
// CPUs) has room for a's grow only once b's shrink gave its 2 CPUs back:
// live, in the kubelet's order, both succeed. Before, the restart resized
// in container id order: a's grow came first, found 2 free CPUs and was
// refused (a warning, a CPUPoolResizeRefused for a pool with room), and a
// stayed on 2 CPUs with a 6000m request, which the kubelet never sends
// again. Now shrinks come first: both are applied.
func TestRestartAppliesShrinksBeforeGrows(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	ann := map[string]string{"pool.cpupool.dev": "exclusive"}
	podA := f.runPod(podSpec{name: "a", namespace: "telco", annotations: ann})
	podB := f.runPod(podSpec{name: "b", namespace: "telco", annotations: ann})
	ctrA, _, err := f.createContainer(podA, "app", 2000)
	require.NoError(t, err)
	ctrB, _, err := f.createContainer(podB, "app", 2000)
	require.NoError(t, err)
	_, err = f.updateContainer(podB, ctrB, 4000) // a live grow: b's 2 added CPUs
	require.NoError(t, err)
	require.Equal(t, 4, mustParse(f.cpus(ctrB)).Size())
	require.Less(t, ctrA.GetId(), ctrB.GetId(), "a comes first in id order (precondition)")
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setRequest(ctrB, 2000) // the kubelet shrank b first ...
	f.setRequest(ctrA, 6000) // ... then grew a into the room b gave back

	second := startPlugin(t, f, desktop, statePath(f))
	a, ok := second.p.alloc.Get(ctrA.GetId())
	require.True(t, ok)
	b, ok := second.p.alloc.Get(ctrB.GetId())
	require.True(t, ok)
	t.Logf("a %s (%dm), b %s (%dm), free %s", a.CPUs, a.MilliCPU, b.CPUs, b.MilliCPU, second.p.alloc.FreeCPUs(a.Pool))
	assert.Equal(t, 2, b.CPUs.Size(), "b shrunk")
	assert.Equal(t, 6, a.CPUs.Size(), "a grown into the CPUs b gave back: the pool has room for both")
	assert.Equal(t, int64(6000), a.MilliCPU)
	assert.Equal(t, a.CPUs.String(), f.cpus(ctrA), "the runtime got a's grown set")
	assert.Equal(t, 0.0, testutil.ToFloat64(second.p.metrics.resizes.WithLabelValues("exclusive", "refused")), "nothing to refuse")
}

// TestLostResizeIsNotTakenBackByAConfigChange: a live grow from 2 to 4
// CPUs was accepted and applied (the runtime runs the container on 4 CPUs
// with a 4000m request) but a kill lost its record. The operator then
// narrowed allowedNamespaces and restarted the plugin. The container keeps
// its pool (it runs there), so the pool's new rules are no reason to take
// CPUs from it. Before, the restart asked the policy for the resize's
// options, took its refusal (the namespace may no longer use the pool) for
// a shape no resize makes, pinned the container back on the record's 2
// CPUs and then refused to give them back: a running container with a
// 4000m request lost 2 CPUs. Now its shape is judged by its record and it
// keeps where it runs.
func TestLostResizeIsNotTakenBackByAConfigChange(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, first.p.Flush())
	first.kill()
	// The lost live grow: a whole core added, as a live grow by 2 adds.
	orig := mustParse(f.cpus(ctr))
	var core int
	for _, c := range []int{4, 5, 6, 7} {
		if !orig.Contains(c) && !orig.Contains(c+8) {
			core = c
			break
		}
	}
	grown := orig.Union(mustParse(fmt.Sprintf("%d,%d", core, core+8)))
	f.setCPUs(ctr, grown.String())
	f.setRequest(ctr, 4000)
	// The operator's new configuration: telco may no longer use exclusive.
	narrowed := testNode{fixture: desktop.fixture, config: strings.Replace(desktop.config, "exclusive: [telco]", "exclusive: [other]", 1)}
	require.NotEqual(t, desktop.config, narrowed.config)

	second := startPlugin(t, f, narrowed, statePath(f))
	a, ok := second.p.alloc.Get(ctr.GetId())
	require.True(t, ok)
	t.Logf("record %s, ran on %s; after restart: %s (%dm), runtime %s\n%s", orig, grown, a.CPUs, a.MilliCPU, f.cpus(ctr), second.log.String())
	assert.Equal(t, grown.String(), f.cpus(ctr), "a running container keeps the CPUs a resize the plugin accepted gave it")
	assert.Equal(t, grown.String(), a.CPUs.String())
	assert.Equal(t, int64(4000), a.MilliCPU)
	assert.Contains(t, second.log.String(), "judged by its record", "the log says why its options were not read anew")
}

// TestRestartDoesNotResizeAContainerAboveTheSharesCapWhoseQuotaWasLifted:
// a Guaranteed exclusive container of 300 CPUs is sized by its CFS quota
// (its shares are at the kubelet's cap), and the plugin lifts that quota
// (disableCPUQuota, the default): the runtime then shows shares 262144 and
// no quota, which milliCPU reads as "at least 256000m". Nothing was
// resized; before, every restart took that for a resize to 256000m,
// refused it (cpupool_resizes_total{result="refused"}, a warning, a
// CPUPoolResizeRefused event on the pod). A request known only to be at
// least what the record's is, is the record's.
func TestRestartDoesNotResizeAContainerAboveTheSharesCapWhoseQuotaWasLifted(t *testing.T) {
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, epyc, statePath(f))
	f.dress = func(c *api.Container) { // as the kubelet passes 300 CPUs
		c.Linux.Resources.Cpu.Shares = api.UInt64(262144)
		c.Linux.Resources.Cpu.Quota = api.Int64(300 * 100000)
	}
	pod := f.runPod(podSpec{name: "g", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	g, resp, err := f.createContainer(pod, "big", 300000)
	require.NoError(t, err)
	require.Equal(t, int64(-1), resp.GetAdjust().GetLinux().GetResources().GetCpu().GetQuota().GetValue(), "the plugin lifts its quota (precondition)")
	f.mu.Lock()
	g.Linux.Resources.Cpu.Quota = api.Int64(-1) // as the runtime applied the adjustment
	f.mu.Unlock()
	require.NoError(t, first.p.Flush())
	first.kill()

	events := &eventLog{}
	second := startPlugin(t, f, epyc, statePath(f), withEvents(events))
	a, ok := second.p.alloc.Get(g.GetId())
	require.True(t, ok)
	assert.Equal(t, 300, a.CPUs.Size())
	assert.Equal(t, int64(300000), a.MilliCPU)
	assert.NotContains(t, second.log.String(), "an in-place resize applied while nri-cpupool was down", "nothing was resized")
	assert.Equal(t, 0.0, testutil.ToFloat64(second.p.metrics.resizes.WithLabelValues("exclusive", "refused")), "nothing to refuse")
	assert.Empty(t, events.of(EventResizeRefused), "no CPUPoolResizeRefused for a resize nobody asked for")
}
