package plugin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// TestHostFilePassMetrics: the reconciler's passes are exported by kind
// (full: a rescan or a flush reads every wanted file; kicked: a change's,
// which takes the files known to meet their want as settled) with the
// files so settled, each as its Status counts them: a full pass adds one
// full, a kicked pass after it with nothing changed adds one kicked and
// takes the files it wants as settled, unread.
func TestHostFilePassMetrics(t *testing.T) {
	f := irqNode(t)
	node := isolatedDesktop
	node.config += "irq: {rescanInterval: 1h}\n" // no rescan in the test
	// No pass in the background (a retry of a pending file would land at
	// any time): the test's own passes alone.
	rp := startPluginTuned(t, f, node, statePath(f), func(p *Plugin) {
		p.isolationTiming = hostfiles.Timing{Delay: time.Hour, MinInterval: time.Hour, Rescan: time.Hour, BackoffInitial: time.Hour, BackoffMax: time.Hour}
	})
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev": "true"}})
	_, _, err := f.createContainer(pod, "fwd", 1000)
	require.NoError(t, err)
	recon := rp.p.isolation.Load().recon

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
