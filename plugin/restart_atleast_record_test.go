package plugin

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/allocator"
)

// quotaLiftedEpyc is the node of the quota-lifted restart tests: an
// exclusive pool of 368 CPUs, room for the 300-CPU container.
var quotaLiftedEpyc = testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}

// admitQuotaLifted starts the plugin on quotaLiftedEpyc and admits a
// quota-lifted Guaranteed exclusive container of 300 CPUs (the kubelet's
// quota said 300; the plugin lifted it, so the runtime shows only "at
// least 256 CPUs"), on CPUs 8-157,200-349, its record once flushed.
func admitQuotaLifted(t *testing.T) (*fakeRuntime, *runningPlugin, *api.Container) {
	t.Helper()
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, quotaLiftedEpyc, statePath(f))
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
	return f, first, g
}

// restartQuotaLiftedAt admits the quota-lifted 300-CPU container
// (admitQuotaLifted), kills the plugin, moves the container to runsOn
// (what cgroup v1 or a hand did while the plugin was down) and restarts it
// under config then, whose exclusive pool no longer has CPUs 8-27 of its
// record: the record cannot be had again, for another reason than a live
// shrink whose CPUs were given away.
func restartQuotaLiftedAt(t *testing.T, runsOn, then string) (*fakeRuntime, *api.Container, allocator.Assignment, string) {
	t.Helper()
	f, first, g := admitQuotaLifted(t)
	first.kill()
	f.setCPUs(g, runsOn)

	second := startPlugin(t, f, testNode{fixture: quotaLiftedEpyc.fixture, config: then}, statePath(f))
	a, ok := second.p.alloc.Get(g.GetId())
	require.True(t, ok)
	log := second.log.String()
	t.Logf("after restart: pool %s rule %v, %d CPUs (%dm) %s, runtime %s\n%s", a.Pool, a.Rule.Kind, a.CPUs.Size(), a.MilliCPU, a.CPUs, f.cpus(g), log)
	return f, g, a, log
}

// A quota-lifted 300-CPU container whose record's CPUs 8-27 the config no
// longer gives its pool (cgroup v1 had dropped them; no resize), running
// on the other 280, every one its pool's as now configured. One restart,
// what each subtest says of it.
func TestAQuotaLiftedContainerWhoseRecordThePoolNoLongerHas(t *testing.T) {
	f, g, a, log := restartQuotaLiftedAt(t, "28-157,200-349", `pools: {exclusive: {cpus: "28-191,200-383"}}`)

	// It was confined to infra, 300 CPUs of work on the infra CPUs, with a
	// message that its kubelet runs without a CFS quota (cpuCFSQuota:
	// false) and advice to move to the device plugin: the plugin lifted
	// the quota itself, and the kubelet's config had nothing to do with
	// it. Its record knows its request (300 CPUs, which the "at least 256"
	// the runtime shows agrees with): it is placed anew by it, as an
	// exact-request container whose record the config no longer allows is.
	t.Run("is placed by its recorded request", func(t *testing.T) {
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
	})

	// Placed again by its record's 300 CPUs, the pool could give it the 20
	// it lacks beside the 280 it runs on; it was moved off CPUs it runs on
	// and may keep (a restart moves a running container only off CPUs that
	// are no longer its pool's).
	t.Run("keeps the CPUs it runs on that are its pool's", func(t *testing.T) {
		require.Equal(t, "exclusive", a.Pool)
		assert.True(t, mustParse("28-157,200-349").IsSubsetOf(a.CPUs),
			"moved off CPUs of its pool it runs on: %s not within %s", mustParse("28-157,200-349").Difference(a.CPUs), a.CPUs)
	})

	// Its record cannot be pinned back, and no other container has any of
	// the 20 CPUs it no longer runs on. That is no live shrink whose
	// given-back CPUs were placed since: the restart kept it on 280 CPUs
	// and rewrote its request to 280000m (the kubelet still wants 300),
	// logged as a shrink a kill lost. It is placed as any container whose
	// record the configuration no longer allows.
	t.Run("is not read as a lost shrink", func(t *testing.T) {
		assert.NotContains(t, log, "a shrink whose record a kill lost", "no shrink happened: its CPUs left the pool")
		assert.NotEqual(t, int64(280000), a.MilliCPU, "the kubelet still wants 300 CPUs, not the count it runs on")
		assert.Contains(t, log, "cannot be restored (container", "the log says why its record cannot be had")
	})
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
