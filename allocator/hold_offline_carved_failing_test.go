package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The config in force does not change. A hold keeps CPUs 4-5 of the
// exclusive pool (count 12: every isolated CPU), CPU 5 offline (the
// kernel took it under the stopped container: it stays the hold's). Then
// the hypervisor hot-removes CPU 15 with no remembered place: the count no
// longer fits, and the running layout carves while failing (HotplugLayout:
// carvingWhileFailing), which puts every offline CPU in infra. The runtime
// reconnects: Synchronize rebuilds the allocator on that layout
// (startOver) and restores the holds with RestoreHold, which must not
// read CPU 5 as "another pool's as now configured" and let it go: nothing
// was configured, and CPU 5 was exclusive's and stays listed there by the
// count. The failing-mode carving says where an offline CPU goes, not
// whose it is.
func TestAHoldKeepsItsOfflineCPUWhenTheRunningLayoutCarvesWhileFailing(t *testing.T) {
	const cfgYAML = "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 12}}\n"
	full := topology(t, "desktop-8c16t")
	cfg := parseConfig(t, cfgYAML)
	old, problems := BuildLayoutRunning(full, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	require.True(t, old.Exclusive.Contains(5))

	topo := withOffline(unplugged(full, 15), 5)
	_, problems = BuildLayoutRunning(topo, cfg)
	require.True(t, problems.HasErrors(), "the config no longer fits the node")
	running, _ := HotplugLayout(old, topo, cfg) // no CPU came online: no problems returned
	require.True(t, running.Exclusive.Contains(4), "CPU 4 stays in exclusive")

	// The runtime reconnects: a new allocator on the running layout.
	a := New(topo, running, false)
	res, err := a.RestoreHold(Hold{Assignment: remembered(t, "x", "4-5", "")})
	require.NoError(t, err)
	t.Logf("hold: CPUs %s; warning: %s", res.Assignment.CPUs, res.Warning)
	assert.Equal(t, "4-5", res.Assignment.CPUs.String(), "its offline CPU 5 stays its own: no config changed")
	assert.Empty(t, res.Warning)
}

// The same reconnect for a running container whose CPU 5 went offline
// under it (the runtime shows it on CPU 4): Readmit keeps it where it
// runs, CPU 5 held offline, by the same rule as the hold
// (offlineElsewhere), without an error.
func TestARunningContainerKeepsItsOfflineCPUWhenTheRunningLayoutCarvesWhileFailing(t *testing.T) {
	const cfgYAML = "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 12}}\n"
	full := topology(t, "desktop-8c16t")
	cfg := parseConfig(t, cfgYAML)
	old, _ := BuildLayoutRunning(full, cfg)
	topo := withOffline(unplugged(full, 15), 5)
	running, _ := HotplugLayout(old, topo, cfg)
	a := New(topo, running, false)
	rec := remembered(t, "y", "4-5", "")
	_, outcome, err := a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "4")})
	t.Logf("readmit: %v, %v", outcome, err)
	assert.NoError(t, err, "no config changed: kept where it runs, CPU 5 held offline")
	assert.Equal(t, Kept, outcome)
}
