package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// As TestARunningKubeletDevicesContainerIsNotConfinedWhenARestartGaveItsOfflineCPUToAnotherPool,
// but the container runs on a CPU that is not its record's (Readmit finds
// it NeedsRepin for that reason; Repin pins it back). The record keeps the
// offline CPU 14 the config gave the shared pool, so the restart must say
// so with the same line as when it runs on its record (docs/configuration.md:
// "the same line is logged for it").
func TestARunningKubeletDevicesContainerPinnedBackLogsTheOfflineCPUItKeeps(t *testing.T) {
	f, ctr, second := restartRunningKubeletDevicesWithCPU14Shared(t, "5")
	a, ok := second.p.alloc.Get(ctr.GetId())
	require.True(t, ok)
	log := second.log.String()
	t.Logf("after restart: pool %s CPUs %s, runtime %s\n%s", a.Pool, a.CPUs, f.cpus(ctr), log)
	require.Equal(t, "6,14", a.CPUs.String(), "the record keeps the kubelet's offline CPU")
	assert.Contains(t, log, "offline CPU 14 is pool shared's as now configured, not pool exclusive's, but the pod's allocation (device-plugin")
}

// The container runs on two other free CPUs of its pool, as many as its
// record's: Readmit keeps it where it runs (KeptWhereItRuns), a record
// without CPU 14. The line that CPU 14 "stays held" for the pod must then
// not be logged: it is not kept. The test first requires that it was kept
// there, else the missing line would prove nothing.
func TestARunningKubeletDevicesContainerKeptElsewhereDoesNotSayItKeepsTheOfflineCPU(t *testing.T) {
	f, ctr, second := restartRunningKubeletDevicesWithCPU14Shared(t, "5,7")
	a, ok := second.p.alloc.Get(ctr.GetId())
	require.True(t, ok)
	log := second.log.String()
	t.Logf("after restart: pool %s CPUs %s, runtime %s\n%s", a.Pool, a.CPUs, f.cpus(ctr), log)
	// Kept where it runs, or the test would say nothing: a container
	// pinned back on its record does keep CPU 14, and says so.
	require.Equal(t, "5,7", a.CPUs.String(), "kept where it runs (KeptWhereItRuns), a record without CPU 14")
	require.Equal(t, "5,7", f.cpus(ctr), "not pinned again")
	require.Contains(t, log, "keeping where it runs")
	assert.NotContains(t, log, "stays held", "CPU 14 is not kept (record %s), yet the log says it stays held", a.CPUs)
}
