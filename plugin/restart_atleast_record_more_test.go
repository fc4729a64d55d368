package plugin

import (
	"fmt"
	"os"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/allocator"
)

// A quota-lifted container of 320 CPUs (recorded) is shrunk live to 300;
// the 20 CPUs given back go to another container; kill -9 before the state
// write. The restart's config no longer gives the pool two CPUs the big
// one runs on (24-25), so keepLostShrink cannot keep it where it runs, and the new
// path places it by its record's stale 320 CPUs: the kubelet wants 300,
// which keepLostShrink itself had read from the CPUs it runs on.
func TestALostShrinkThatCannotStayIsPlacedByTheShrunkRequestNotTheStaleRecord(t *testing.T) {
	// The other takes every free CPU, the 20 given back among them (so
	// allocator.GivenAway reads it as a lost shrink); 306 CPUs are left
	// free: the stale 320 is confined to infra (on 10 CPUs) though the 300
	// the kubelet wants fit, and the message asks for room for 320.
	otherMilli := int64(68000)
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
		g.Linux.Resources.Cpu.Quota = api.Int64(-1)
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
	o, _, err := f.createContainer(other, "c", otherMilli)
	require.NoError(t, err)
	first.kill()
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600))
	t.Logf("big runs on %s, other on %s", f.cpus(g), f.cpus(o))

	second := startPlugin(t, f, testNode{fixture: epyc.fixture, config: `pools: {exclusive: {cpus: "8-23,26-383"}}`}, statePath(f))
	a, ok := second.p.alloc.Get(g.GetId())
	require.True(t, ok)
	t.Logf("after restart: pool %s rule %v, %d CPUs (%dm); runtime %s\n%s", a.Pool, a.Rule.Kind, a.CPUs.Size(), a.MilliCPU, f.cpus(g), second.log.String())
	assert.NotEqual(t, allocator.RuleConfined, a.Rule.Kind, "the pool has room for the 300 CPUs the kubelet wants")
	assert.Equal(t, int64(300000), a.MilliCPU, "the kubelet shrank it to 300 CPUs; the record's 320 is stale")
	assert.NotEqual(t, 320, a.CPUs.Size())
}

// The same spot for an exact-request container of 4 CPUs: one CPU of its
// record left the pool, cgroup v1 runs it on the other 3 (all its pool's).
// Placed anew, is it kept on those 3 (plus one), or moved off them?
func TestAnExactRequestContainerPlacedAgainKeepsTheCPUsItRunsOnThatAreItsPools(t *testing.T) {
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, epyc, statePath(f))
	pod := f.runPod(podSpec{name: "x", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	x, _, err := f.createContainer(pod, "c", 4000)
	require.NoError(t, err)
	rec := mustParse(f.cpus(x))
	require.NoError(t, first.p.Flush())
	first.kill()
	lost := rec.List()[0]
	runs := rec.Difference(mustParse(fmt.Sprint(lost)))
	f.setCPUs(x, runs.String())
	second := startPlugin(t, f, testNode{fixture: epyc.fixture, config: fmt.Sprintf(`pools: {exclusive: {cpus: "%d-191,200-383"}}`, lost+1)}, statePath(f))
	a, ok := second.p.alloc.Get(x.GetId())
	require.True(t, ok)
	t.Logf("record %s, ran on %s, now %s (%s)\n%s", rec, runs, a.CPUs, a.Pool, second.log.String())
	assert.True(t, runs.IsSubsetOf(a.CPUs), "moved off %s", runs.Difference(a.CPUs))
}

// Its record cannot be had (8-27 left the pool) and its namespace may no
// longer use pool exclusive: confined, rightly, but the reason says its
// record's request "cannot be placed anew (nri-cpupool lifted its CFS
// quota, so the runtime shows it only as at least 256 CPUs)": the request
// is known (300000m) and the quota has nothing to do with the refusal,
// which is the namespace's.
func TestAConfinedQuotaLiftedContainerIsNotToldTheQuotaIsWhyItCannotBePlaced(t *testing.T) {
	_, _, a, log := restartQuotaLiftedAt(t, "28-157,200-349", `{pools: {exclusive: {cpus: "28-191,200-383"}}, allowedNamespaces: {exclusive: [telco]}}`)
	require.Equal(t, allocator.RuleConfined, a.Rule.Kind)
	confined := lineWith(log, "confined to infra")
	assert.Contains(t, confined, "may not use pool exclusive")
	assert.NotContains(t, confined, "lifted its CFS quota, so the runtime shows it only as at least 256 CPUs)",
		"the quota is no cause of a namespace's refusal")
}
