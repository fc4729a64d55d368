package plugin

import (
	"os"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/state"
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
		assert.Contains(t, got[0].Message, "it is pinned again on CPUs 8-157,200-349", "where it runs now")
	}
}

// keepResized took any running exclusive part of another size, at least
// 256 CPUs, as the request of a lost resize of a quota-lifted container.
// No resize happened here: the container runs on a set the plugin never
// gave it (cgroup v1 dropped 20 CPUs that went offline while the plugin
// was down and came back; an outside tool moved and widened it). An
// exact-request container in the same spot is pinned back on its record;
// the at-least one was kept there, its recorded request rewritten to the
// count it happens to run on, with a false "in-place resize" warning. The
// kubelet still believes 300 CPUs. Only a grow of the record (all of its
// CPUs and more, in a shape a resize makes) is read as a lost resize; a
// set widened onto every free CPU of the pool is exactly what a live grow
// to that count gives, and cannot be told from one.
func TestAQuotaLiftedContainerOnASetNoGrowMadeIsPinnedBack(t *testing.T) {
	for name, reshape := range map[string]func(rec cpuset.CPUSet) cpuset.CPUSet{
		"shrunk by a cgroup v1 offline/online cycle": func(rec cpuset.CPUSet) cpuset.CPUSet {
			return cpuset.New(rec.List()[20:]...) // 280 CPUs, all online again
		},
		"moved off 20 of its CPUs and widened from outside": func(rec cpuset.CPUSet) cpuset.CPUSet {
			return cpuset.New(rec.List()[20:]...).Union(mustParse("158-191,350-383")) // 348 CPUs
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, first, g := admitQuotaLifted(t)
			rec := f.cpus(g)
			first.kill()
			_, err := os.Stat(statePath(f))
			require.NoError(t, err)
			f.setCPUs(g, reshape(mustParse(rec)).String()) // no resize: the kubelet still wants 300

			events := &eventLog{}
			second := startPlugin(t, f, quotaLiftedEpyc, statePath(f), withEvents(events))
			a, ok := second.p.alloc.Get(g.GetId())
			require.True(t, ok)
			t.Logf("after restart: %d CPUs (%dm), runtime %d CPUs\n%s", a.CPUs.Size(), a.MilliCPU, mustParse(f.cpus(g)).Size(), second.log.String())
			assert.Equal(t, rec, f.cpus(g), "no resize happened: pinned back on its record, as an exact-request container is")
			assert.Equal(t, int64(300000), a.MilliCPU, "its request was not resized")
			assert.NotContains(t, second.log.String(), "in-place resize the state file did not record")
			assert.Equal(t, 0.0, testutil.ToFloat64(second.p.metrics.resizes.WithLabelValues("exclusive", "refused")))
		})
	}
}

// The contrast: the same cgroup v1 drop for an exact-request container is
// pinned back on its record (it is not the runtime's request).
func TestAnExactRequestContainerShrunkByCgroupV1IsPinnedBack(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "x", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	x, _, err := f.createContainer(pod, "c", 4000)
	require.NoError(t, err)
	rec := f.cpus(x)
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setCPUs(x, cpuset.New(mustParse(rec).List()[1:]...).String())
	second := startPlugin(t, f, desktop, statePath(f))
	assert.Equal(t, rec, f.cpus(x), "%s", second.log.String())
}

// The refusal of a lost resize derived from an at-least request: its event
// told the pod "it is pinned again on CPUs <record>" before repairAll
// tried. Under a
// config whose exclusive pool lacks CPUs of the record too, Repin fails,
// adoptUnknown cannot size an "at least 256 CPUs" container and confines
// it to infra: the pod was told it is back on its 300 CPUs.
func TestADerivedResizeRefusalTellsWhereTheContainerRunsNow(t *testing.T) {
	f, g, second, events := lostQuotaLiftedGrow(t, `pools: {exclusive: {cpus: "8-149,170-191,200-383"}}`)
	a, _ := second.p.alloc.Get(g.GetId())
	t.Logf("pool %s, runtime %d CPUs", a.Pool, mustParse(f.cpus(g)).Size())
	for _, e := range events.of(EventResizeRefused) {
		t.Logf("event: %s", e.Message)
	}
	got := events.of(EventResizeRefused)
	require.Len(t, got, 1)
	if a.Pool != "exclusive" || !a.CPUs.Equals(mustParse("8-157,200-349")) {
		assert.NotContains(t, got[0].Message, "it is pinned again on CPUs 8-157,200-349",
			"the event says where it runs: it runs in pool %s on %s", a.Pool, f.cpus(g))
	}
	if a.Rule.Kind == allocator.RuleConfined {
		assert.Contains(t, got[0].Message, "it is confined to pool infra", "the pod is told")
	}
}

// A quota-lifted Guaranteed exclusive container of 280 CPUs grown to 320
// (recorded) is shrunk live to 300 (the plugin accepts it and gives 20
// CPUs back), then a new exclusive container is placed on every free CPU
// of the pool, the 20 given back among them; kill -9 before the state
// write. The restart sees the big one on 300 CPUs, its request only "at
// least 256 CPUs", no grow of its record: pinned back on its record it
// would need the 20 CPUs the other running container (adopted where it
// runs) now has. Placed anew it cannot be sized, and was confined to
// infra: 300 CPUs of work squeezed onto 16 although it ran on a set
// nobody else had. The runtime is the truth: it keeps the CPUs it runs
// on, its record says 300 CPUs, and nobody moves.
func TestALostShrinkOfAQuotaLiftedContainerWhoseCPUsWereGivenAwayStaysWhereItRuns(t *testing.T) {
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, epyc, statePath(f))
	f.dress = func(c *api.Container) {
		if c.Name == "big" {
			c.Linux.Resources.Cpu.Shares = api.UInt64(262144)
			c.Linux.Resources.Cpu.Quota = api.Int64(280 * 100000)
		}
	}
	pod := f.runPod(podSpec{name: "g", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	g, _, err := f.createContainer(pod, "big", 280000)
	require.NoError(t, err)
	f.mu.Lock()
	g.Linux.Resources.Cpu.Quota = api.Int64(-1)
	f.mu.Unlock()
	resizeLive := func(cpus int64) {
		t.Helper()
		resp, err := f.r.UpdateContainer(t.Context(), &api.UpdateContainerRequest{Pod: pod, Container: g,
			LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(262144), Quota: api.Int64(cpus * 100000), Period: api.UInt64(100000)}}})
		require.NoError(t, err)
		f.mu.Lock()
		f.apply(resp.GetUpdate())
		g.Linux.Resources.Cpu.Quota = api.Int64(-1) // the reply lifted it
		f.mu.Unlock()
		require.Equal(t, int(cpus), mustParse(f.cpus(g)).Size(), "resized live")
	}
	resizeLive(320)
	require.NoError(t, first.p.Flush())
	saved, err := os.ReadFile(statePath(f))
	require.NoError(t, err)
	resizeLive(300)
	f.dress = nil
	other := f.runPod(podSpec{name: "o", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	o, _, err := f.createContainer(other, "c", 68000)
	require.NoError(t, err)
	require.Equal(t, 68, mustParse(f.cpus(o)).Size())
	first.kill()
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded the shrink and the new container")
	big, small := f.cpus(g), f.cpus(o)

	second := startPlugin(t, f, epyc, statePath(f))
	a, ok := second.p.alloc.Get(g.GetId())
	require.True(t, ok)
	t.Logf("after restart: pool %s rule %v, %d CPUs; runtime %s\n%s", a.Pool, a.Rule.Kind, a.CPUs.Size(), f.cpus(g), second.log.String())
	assert.Equal(t, "exclusive", a.Pool, "not confined")
	assert.Equal(t, big, f.cpus(g), "it runs where the live shrink left it, on CPUs nobody else has")
	assert.Equal(t, big, a.CPUs.String())
	assert.Equal(t, int64(300000), a.MilliCPU, "its request read from the CPUs it runs on")
	assert.Equal(t, small, f.cpus(o), "nobody moved")
	assert.Contains(t, second.log.String(), "1 containers kept, 0 re-pinned, 1 placed, 0 confined")
	require.NoError(t, second.p.Flush())
	st, err := state.ReadState(statePath(f))
	require.NoError(t, err)
	assert.Equal(t, big, st.Containers[g.GetId()].CPUs, "its record says where it runs")
	assert.Equal(t, int64(300000), st.Containers[g.GetId()].MilliCPU)
}

// A quota-lifted 300-CPU container that cgroup v1 shrank to 280 (20 CPUs
// offline and back while the plugin was down; no resize) is pinned back on
// its record at the restart, rightly. The log told the operator a resize
// to 256000m happened, that the container requests 256 CPUs, and that its
// kubelet runs with cpuCFSQuota: false (the plugin lifted the quota
// itself), with advice to move to the device plugin: none of it true. It
// says the set is no grow and no resize is read from it, and that the
// container was pinned again on its record.
func TestAQuotaLiftedContainerPinnedBackIsNotLoggedAsAResizeTo256CPUs(t *testing.T) {
	f, first, g := admitQuotaLifted(t)
	rec := f.cpus(g)
	first.kill()
	f.setCPUs(g, cpuset.New(mustParse(rec).List()[20:]...).String())

	events := &eventLog{}
	second := startPlugin(t, f, quotaLiftedEpyc, statePath(f), withEvents(events))
	require.Equal(t, rec, f.cpus(g), "pinned back")
	log := second.log.String()
	assert.NotContains(t, log, "cpuCFSQuota: false", "the plugin lifted the quota; the kubelet's config is not the cause")
	assert.NotContains(t, log, "resize to 256000m", "no resize happened")
	assert.NotContains(t, log, "requests 256000m", "it requests 300 CPUs")
	assert.Contains(t, log, "no resize is read from the set")
	assert.Contains(t, log, "not on its CPUs "+rec+"; pinned again")
	assert.Empty(t, events.of(EventResizeRefused), "nothing to tell the pod: no resize was refused")
}
