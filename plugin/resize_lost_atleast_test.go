package plugin

import (
	"os"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A quota-lifted Guaranteed exclusive container of 300 CPUs grows live to
// 320 (the kubelet's quota 32000000; the reply lifts it again); kill -9
// before the state write. The restart sees it on 320 CPUs with capped
// shares and no quota: "at least 256000m". keepResized's fallback (the
// policy cannot size an exclusive container by a bound) dropped the bound
// (256 CPUs != 320: refused), repairAll pinned it back on the record's 300
// CPUs, and cpuRequestChanged(300000, 256000, atLeast) said "no resize":
// the kubelet's grow was undone, with no refusal counted or told to the pod.
// lostQuotaLiftedGrow runs that up to the restart, with config then.
func lostQuotaLiftedGrow(t *testing.T, then string) (f *fakeRuntime, g *api.Container, second *runningPlugin, events *eventLog) {
	t.Helper()
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f = newFakeRuntime(t, false)
	first := startPlugin(t, f, epyc, statePath(f))
	f.dress = func(c *api.Container) {
		c.Linux.Resources.Cpu.Shares = api.UInt64(262144)
		c.Linux.Resources.Cpu.Quota = api.Int64(300 * 100000)
	}
	pod := f.runPod(podSpec{name: "g", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	g, _, err := f.createContainer(pod, "big", 300000)
	require.NoError(t, err)
	f.mu.Lock()
	g.Linux.Resources.Cpu.Quota = api.Int64(-1)
	f.mu.Unlock()
	require.NoError(t, first.p.Flush())
	saved, err := os.ReadFile(statePath(f))
	require.NoError(t, err)
	resp, err := f.r.UpdateContainer(t.Context(), &api.UpdateContainerRequest{Pod: pod, Container: g,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(262144), Quota: api.Int64(320 * 100000), Period: api.UInt64(100000)}}})
	require.NoError(t, err)
	f.mu.Lock()
	f.apply(resp.GetUpdate())
	g.Linux.Resources.Cpu.Quota = api.Int64(-1) // the reply lifted it
	f.mu.Unlock()
	require.Equal(t, 320, mustParse(f.cpus(g)).Size(), "grown live")
	first.kill()
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded the grow")

	events = &eventLog{}
	second = startPlugin(t, f, testNode{fixture: epyc.fixture, config: then}, statePath(f), withEvents(events))
	a, ok := second.p.alloc.Get(g.GetId())
	require.True(t, ok)
	t.Logf("after restart: %d CPUs (%dm), runtime %d CPUs\n%s", a.CPUs.Size(), a.MilliCPU, mustParse(f.cpus(g)).Size(), second.log.String())
	return f, g, second, events
}

func TestLostGrowOfAQuotaLiftedContainerStaysApplied(t *testing.T) {
	f, g, second, events := lostQuotaLiftedGrow(t, `pools: {exclusive: {cpus: "8-191,200-383"}}`)
	assert.Equal(t, 320, mustParse(f.cpus(g)).Size(), "the kubelet's grow stays applied")
	a, _ := second.p.alloc.Get(g.GetId())
	assert.Equal(t, int64(320000), a.MilliCPU, "its request is what it runs on")
	assert.Contains(t, second.log.String(), "keeping where it runs")
	assert.Empty(t, events.of(EventResizeRefused))
}

// The same lost grow under a config whose exclusive pool no longer has
// some of the CPUs it grew onto: it cannot stay, and is pinned back on its
// record, but loudly (refused count, an event on its pod), as a live
// refusal is: never silently.
func TestLostGrowOfAQuotaLiftedContainerThatCannotStayIsRefusedLoudly(t *testing.T) {
	f, g, second, events := lostQuotaLiftedGrow(t, `pools: {exclusive: {cpus: "8-159,168-191,200-383"}}`)
	assert.Equal(t, 300, mustParse(f.cpus(g)).Size(), "pinned back on its record")
	assert.Equal(t, 1.0, testutil.ToFloat64(second.p.metrics.resizes.WithLabelValues("exclusive", "refused")))
	if got := events.of(EventResizeRefused); assert.Len(t, got, 1) {
		assert.Contains(t, got[0].Message, "320000m")
	}
}
