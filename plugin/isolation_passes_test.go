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

// TestHostFileCountersSurviveARestart: a reload or a hotplug makes a new
// reconciler (restartIsolation), whose own counts start at zero; the
// host files' counters go on from where the closed one left them, since
// Prometheus reads a counter that falls as a reset (a restart of the
// process).
func TestHostFileCountersSurviveARestart(t *testing.T) {
	f := irqNode(t)
	node := isolatedDesktop
	node.config += "irq: {rescanInterval: 1h}\n"
	rp := startPluginTuned(t, f, node, statePath(f), func(p *Plugin) {
		p.isolationTiming = hostfiles.Timing{Delay: time.Hour, MinInterval: time.Hour, Rescan: time.Hour, BackoffInitial: time.Hour, BackoffMax: time.Hour}
	})
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev": "true"}})
	_, _, err := f.createContainer(pod, "fwd", 1000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	require.NoError(t, rp.p.isolation.Load().recon.FlushKicked())

	counters := []struct{ name, label string }{
		{"cpupool_host_file_writes_total", ""}, {"cpupool_host_file_restores_total", ""},
		{"cpupool_host_file_passes_total", "full"}, {"cpupool_host_file_passes_total", "kicked"},
		{"cpupool_host_files_settled_total", ""},
		{"cpupool_host_file_errors_total", "transient"}, {"cpupool_host_file_errors_total", "permanent"},
	}
	read := func() []float64 {
		mfs, err := rp.p.Registry().Gather()
		require.NoError(t, err)
		out := make([]float64, len(counters))
		for i, c := range counters {
			found := false
			for _, mf := range mfs {
				if mf.GetName() != c.name {
					continue
				}
				for _, m := range mf.GetMetric() {
					if c.label == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == c.label) {
						out[i], found = m.GetCounter().GetValue(), true
					}
				}
			}
			require.True(t, found, "no %s{%s}", c.name, c.label)
		}
		return out
	}
	before := read()
	require.Positive(t, before[0], "no host file written before the restart: the test shows nothing")
	require.Positive(t, before[4], "no file settled before the restart: the test shows nothing")

	rp.p.restartIsolation()
	next := rp.p.isolation.Load().recon
	require.NoError(t, rp.p.FlushIsolation())
	st := next.Status()
	after := read()
	own := []uint64{st.Writes, st.Restores, st.FullPasses, st.KickedPasses, st.Settled, st.TransientErrors, st.PermanentErrors}
	for i, c := range counters {
		require.GreaterOrEqual(t, after[i], before[i], "%s{%s} fell when the reconciler was made again", c.name, c.label)
		require.Equal(t, before[i]+float64(own[i]), after[i], "%s{%s}: the closed reconciler's count and the new one's", c.name, c.label)
	}
	require.Equal(t, before[2]+1, after[2], "the new reconciler's flush is one more full pass")
}
