package plugin

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/allocator"
)

// restartQuotaLiftedAt admits a quota-lifted Guaranteed exclusive
// container of 300 CPUs (the kubelet's quota said 300; the plugin lifted
// it, so the runtime shows only "at least 256 CPUs"), kills the plugin,
// moves the container to runsOn (what cgroup v1 or a hand did while the
// plugin was down) and restarts it under config then, whose exclusive pool
// no longer has CPUs 8-27 of its record: the record cannot be had again,
// for another reason than a live shrink whose CPUs were given away.
func restartQuotaLiftedAt(t *testing.T, runsOn, then string) (*fakeRuntime, *api.Container, allocator.Assignment, string) {
	t.Helper()
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, epyc, statePath(f))
	f.dress = func(c *api.Container) {
		c.Linux.Resources.Cpu.Shares = api.UInt64(262144)
		c.Linux.Resources.Cpu.Quota = api.Int64(300 * 100000)
	}
	pod := f.runPod(podSpec{name: "g", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	g, _, err := f.createContainer(pod, "big", 300000)
	require.NoError(t, err)
	f.mu.Lock()
	g.Linux.Resources.Cpu.Quota = api.Int64(-1) // the plugin lifted it
	f.mu.Unlock()
	require.Equal(t, "8-157,200-349", f.cpus(g))
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setCPUs(g, runsOn)

	second := startPlugin(t, f, testNode{fixture: epyc.fixture, config: then}, statePath(f))
	a, ok := second.p.alloc.Get(g.GetId())
	require.True(t, ok)
	log := second.log.String()
	t.Logf("after restart: pool %s rule %v, %d CPUs (%dm) %s, runtime %s\n%s", a.Pool, a.Rule.Kind, a.CPUs.Size(), a.MilliCPU, a.CPUs, f.cpus(g), log)
	return f, g, a, log
}

// A quota-lifted 300-CPU container whose record's CPUs 8-27 the config no
// longer gives its pool (cgroup v1 had dropped them; no resize) was
// confined to infra, 300 CPUs of work on the infra CPUs, with a message
// that its kubelet runs without a CFS quota (cpuCFSQuota: false) and
// advice to move to the device plugin: the plugin lifted the quota itself,
// and the kubelet's config had nothing to do with it. Its record knows its
// request (300 CPUs, which the "at least 256" the runtime shows agrees
// with): it is placed anew by it, as an exact-request container whose
// record the config no longer allows is.
func TestAQuotaLiftedContainerWhoseRecordThePoolNoLongerHasIsPlacedByItsRecordedRequest(t *testing.T) {
	f, g, a, log := restartQuotaLiftedAt(t, "28-157,200-349", `pools: {exclusive: {cpus: "28-191,200-383"}}`)
	assert.Equal(t, "exclusive", a.Pool, "not confined to infra")
	assert.NotEqual(t, allocator.RuleConfined, a.Rule.Kind)
	assert.Equal(t, 300, a.CPUs.Size(), "the 300 CPUs its record and the kubelet say")
	assert.Equal(t, int64(300000), a.MilliCPU)
	assert.Equal(t, a.CPUs.String(), f.cpus(g), "pinned where it was placed")
	assert.True(t, a.CPUs.IsSubsetOf(mustParse("28-191,200-383")), "on its pool as now configured")
	assert.NotContains(t, log, "cpuCFSQuota", "the plugin lifted the quota; the kubelet's config is not the cause")
	assert.NotContains(t, log, "confined to infra")
	assert.Contains(t, log, "CPUs 8-27 are outside pool exclusive (28-191,200-383) as now configured", "why its record cannot be had")
	assert.Contains(t, log, "placing its record's request of 300000m again")
}

// When the pool as now configured cannot give it its 300 CPUs at all, it
// is confined to infra, and the message says the real cause: which CPUs of
// its record are gone and why, that its 300 CPUs cannot be placed anew and
// why, and what to do, not the kubelet's CFS quota.
func TestAQuotaLiftedContainerThatCannotBePlacedAgainIsConfinedWithTheRealCause(t *testing.T) {
	_, _, a, log := restartQuotaLiftedAt(t, "28-157,200-349", `pools: {exclusive: {cpus: "28-191,200-300"}}`)
	assert.Equal(t, "infra", a.Pool, "265 CPUs in the pool: 300 cannot be placed")
	assert.Equal(t, allocator.RuleConfined, a.Rule.Kind)
	assert.NotContains(t, log, "cpuCFSQuota", "the plugin lifted the quota; the kubelet's config is not the cause")
	assert.NotContains(t, log, "devicePlugin")
	confined := lineWith(log, "confined to infra")
	assert.Contains(t, confined, "its CPUs 8-157,200-349 cannot be had again (", "which CPUs")
	assert.Contains(t, confined, "CPUs 8-27,301-349 are outside pool exclusive (28-191,200-300) as now configured", "why")
	assert.Contains(t, confined, "its record's request of 300000m cannot be placed anew", "what failed")
	assert.Contains(t, confined, "give pool exclusive room for 300 CPUs", "how to fix")
	assert.Contains(t, a.Rule.Detail, "recreate the pod")
}

// lineWith is the first line of log that contains s, "" when none does.
func lineWith(log, s string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
