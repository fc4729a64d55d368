package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pod's exclusive-non-isolcpus container (2 CPUs, 1 and 9 lent from
// infra) fails and is held; while the plugin is down the kubelet starts
// its next run, which runs on CPU 1 only (an outside actor, a cgroup v1
// drop), and the restart's config keeps 3 CPUs in infra. Adopt keeps it on
// 1, cannot grow it (9 would leave infra 2), undoes that and puts the
// hold back; Allocate gives it its hold 1,9. The infra member must stay on
// infra (0,8): not be pinned on 1,9 with the exclusive container.
func TestRestartKeptButNotGrownDoesNotPinInfraMembersOnTheHeldCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	app, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	c0, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	require.Equal(t, "1,9", f.cpus(c0))
	require.Equal(t, "0,8", f.cpus(app))
	f.exitContainer(c0, 1)
	require.Len(t, first.p.alloc.Holds(), 1)
	require.NoError(t, first.p.Flush())
	first.kill()

	c1, _, err := f.createAttempt(pod, "c", 1, 2000) // no plugin: not pinned
	require.NoError(t, err)
	f.setCPUs(c1, "1")
	tight := testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 3}
allowedNamespaces:
  exclusive: [telco]
`}
	second := startPlugin(t, f, tight, statePath(f))
	a, ok := second.p.alloc.Get(c1.GetId())
	require.True(t, ok)
	t.Logf("c1 %s (runtime %s); app runtime %s\n%s", a.CPUs, f.cpus(c1), f.cpus(app), second.log.String())
	require.Equal(t, "1,9", a.CPUs.String(), "its hold's CPUs")
	assert.Equal(t, "0,8", f.cpus(app), "the infra member stays on infra, off the exclusive CPUs 1,9")
	w, ok := second.p.alloc.Get(app.GetId())
	require.True(t, ok)
	assert.Equal(t, "0,8", w.CPUs.String(), "the infra member's record")
}
