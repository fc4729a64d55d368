package plugin

import (
	"os"

	"github.com/containerd/nri/pkg/api"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rvP-2 over NRI: an exclusive-non-isolcpus shared-cpus container (its
// exclusive CPUs lent from infra) grew live from 1 to 2 CPUs; a kill -9
// lost the record. At the restart fxN's Readmit rule reads the lost grow's
// infra CPU as "its shared part on infra" and keeps it on the record's one
// CPU: keepResized never sees it. With the same config resizeAsTheRuntime
// grows it again ("resized", counted); with a config that no longer allows
// the namespace (fxK's own scenario) the grow is refused and the running
// container loses the CPU it was given.
func TestRvPENISharedLostGrowKeptWhereItRuns(t *testing.T) {
	for _, narrowed := range []bool{false, true} {
		t.Run(map[bool]string{false: "same config", true: "namespace no longer allowed"}[narrowed], func(t *testing.T) {
			node := testNode{fixture: desktop.fixture, config: desktop.config + "  exclusive-non-isolcpus: [telco]\n"}
			f := newFakeRuntime(t, false)
			first := startPlugin(t, f, node, statePath(f))
			pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus", "shared-cpus.cpupool.dev": "true"}})
			ctr, _, err := f.createContainer(pod, "c", 1000)
			require.NoError(t, err)
			before := f.cpus(ctr)
			require.NoError(t, first.p.Flush()) // the record of the 1-CPU container
			saved, err := os.ReadFile(statePath(f))
			require.NoError(t, err)
			_, err = f.updateContainer(pod, ctr, 2000) // a live grow
			require.NoError(t, err)
			grown := f.cpus(ctr)
			t.Logf("created on %s, grown live to %s", before, grown)
			require.NotEqual(t, before, grown)
			f.setRequest(ctr, 2000)
			first.kill()
			require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded the grow")

			next := node
			if narrowed {
				next.config = strings.Replace(node.config, "exclusive-non-isolcpus: [telco]", "exclusive-non-isolcpus: [other]", 1)
				require.NotEqual(t, node.config, next.config)
			}
			second := startPlugin(t, f, next, statePath(f))
			a, ok := second.p.alloc.Get(ctr.GetId())
			require.True(t, ok)
			t.Logf("after restart: %s (%dm), runtime %s\n%s", a.CPUs, a.MilliCPU, f.cpus(ctr), second.log.String())
			assert.Equal(t, grown, f.cpus(ctr), "a running container keeps the CPUs a resize the plugin accepted gave it")
			assert.Equal(t, int64(2000), a.MilliCPU)
			assert.Contains(t, second.log.String(), "keeping where it runs")
			assert.Equal(t, 0.0, testutil.ToFloat64(second.p.metrics.resizes.WithLabelValues("exclusive-non-isolcpus", "refused")))
		})
	}
}

// rvP-1 over NRI: restart #1 (config moves the shared pool onto 4,12,
// which "old" holds) keeps "dpdk" where it runs (7,15, not its record's)
// and sends its shared part to infra; kill -9 before the state write;
// restart #2 with the same config moves the running exclusive container.
func TestRvPKill9AfterKeptWhereItRunsWithSharedPartOnInfra(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	ex := map[string]string{"pool.cpupool.dev": "exclusive"}
	oldPod := f.runPod(podSpec{name: "old", namespace: "telco", annotations: ex})
	old, _, err := f.createContainer(oldPod, "c", 2000)
	require.NoError(t, err)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	dpdk, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	t.Logf("old on %s, dpdk on %s", f.cpus(old), f.cpus(dpdk))
	require.Equal(t, "4,12", f.cpus(old), "precondition")
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setCPUs(dpdk, "2-3,7,10-11,15") // runs on another free set of its size

	moved := testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "2-3,5-7,10-11,13-15"}
  shared: {cpus: "4,12"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`}
	saved, err := os.ReadFile(statePath(f))
	require.NoError(t, err)
	second := startPlugin(t, f, moved, statePath(f))
	require.Equal(t, "0-1,7-9,15", f.cpus(dpdk), "restart #1 keeps it on 7,15, its shared part on infra:\n%s", second.log.String())
	second.kill()
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded restart #1")

	third := startPlugin(t, f, moved, statePath(f))
	assert.Equal(t, "0-1,7-9,15", f.cpus(dpdk), "a restart with the same config moves nobody:\n%s", third.log.String())
}

// rvP-3 (fxK): a quota-lifted Guaranteed exclusive container of 300 CPUs
// grows live to 320 (the kubelet's quota 32000000; the reply lifts it
// again); kill -9 before the state write. The restart sees it on 320 CPUs
// with capped shares and no quota: "at least 256000m". keepResized's
// fallback drops atLeast (256 CPUs != 320: refused), repairAll pins it
// back on the record's 300 CPUs, and cpuRequestChanged(300000, 256000,
// atLeast) says "no resize": the kubelet's grow is silently undone.
func TestRvPLostGrowOfAQuotaLiftedContainerIsUndoneSilently(t *testing.T) {
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
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded the shrink")

	events := &eventLog{}
	second := startPlugin(t, f, epyc, statePath(f), withEvents(events))
	a, ok := second.p.alloc.Get(g.GetId())
	require.True(t, ok)
	t.Logf("after restart: %d CPUs (%dm), runtime %d CPUs\n%s", a.CPUs.Size(), a.MilliCPU, mustParse(f.cpus(g)).Size(), second.log.String())
	assert.Equal(t, 320, mustParse(f.cpus(g)).Size(), "the kubelet's grow stays applied (or is at least reported)")
}

// rvP check: a shared-cpus container an outside tool widened onto infra
// (its exclusive part untouched) is Kept by fxN's rule; the restart must
// still pin it back on its exclusive part plus the shared pool.
func TestRvPOutsideToolAddsInfraToASharedCPUsContainer(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	dpdk, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	want := f.cpus(dpdk)
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setCPUs(dpdk, mustParse(want).Union(mustParse("0-1,8-9")).String())
	second := startPlugin(t, f, desktop, statePath(f))
	assert.Equal(t, want, f.cpus(dpdk), "pinned back:\n%s", second.log.String())
}
