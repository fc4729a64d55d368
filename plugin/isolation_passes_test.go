package plugin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestHostFilePassMetrics: the reconciler's passes are exported by kind
// (full: a rescan or a flush reads every wanted file; kicked: a change's,
// which takes the files known to meet their want as settled) with the
// files so settled, each as its Status counts them: a full pass adds one
// full, a kicked pass after it with nothing changed adds one kicked and
// settles every IRQ file it wants.
func TestHostFilePassMetrics(t *testing.T) {
	f := irqNode(t)
	node := isolatedDesktop
	node.config += "irq: {rescanInterval: 1h}\n" // no rescan in the test
	rp := startPlugin(t, f, node, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev": "true"}})
	_, _, err := f.createContainer(pod, "fwd", 1000)
	require.NoError(t, err)
	recon := rp.p.isolation.Load().recon
	timing := rp.p.isolationTiming
	// The first pass (the Synchronize's, perhaps with the creation), then
	// quiet: no pass due any more.
	require.Eventually(t, func() bool { return recon.Status().Passes >= 1 }, 5*time.Second, time.Millisecond, "the first pass")
	for passes, quiet := recon.Status().Passes, time.Now(); time.Since(quiet) < 3*timing.MinInterval; time.Sleep(timing.Delay) {
		if n := recon.Status().Passes; n != passes {
			passes, quiet = n, time.Now()
		}
	}

	before := recon.Status()
	require.NoError(t, rp.p.FlushIsolation())
	require.NoError(t, recon.FlushKicked())
	after := recon.Status()
	require.Equal(t, before.FullPasses+1, after.FullPasses)
	require.Equal(t, before.KickedPasses+1, after.KickedPasses)
	settled := after.Settled - before.Settled
	require.Positive(t, settled, "the kicked pass read nothing: every file it wants is as the full pass left it")

	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(fmt.Sprintf(`
# HELP cpupool_host_file_passes_total Passes over the host files, by kind: full (a rescan or a flush: every wanted file read) or kicked (a change's: files known to meet their want not read again).
# TYPE cpupool_host_file_passes_total counter
cpupool_host_file_passes_total{kind="full"} %d
cpupool_host_file_passes_total{kind="kicked"} %d
# HELP cpupool_host_files_settled_total Wanted host files that kicked passes took as meeting their want, without reading them.
# TYPE cpupool_host_files_settled_total counter
cpupool_host_files_settled_total %d
`, after.FullPasses, after.KickedPasses, after.Settled)), "cpupool_host_file_passes_total", "cpupool_host_files_settled_total"))
}
