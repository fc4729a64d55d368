package plugin

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// daemonRuntime has BenchmarkCreateContainerRoundTripAllFeaturesProcess
// read the real binary's own Go runtime around the measured rounds
// (issue 45), from its --pprof-address's /debug/runtime-metrics, which it
// then serves (with the block and mutex profiles sampled meanwhile, as
// --pprof-address does): daemon-sched-latency-median-µs and -p99-µs (how
// long the daemon's runnable goroutines waited to run, the bucket's upper
// bound), daemon-gc-cpu-fraction (the GC's share of the daemon's CPU) and,
// when the daemon runs with -daemon.env=GODEBUG=gctrace=1, the GC lines
// its log got meanwhile per 1,000 round trips (daemon-gctrace-per-1k-rt).
var daemonRuntime = flag.Bool("daemon.runtime", false, "read the real binary's scheduler latency and GC from its runtime/metrics around the measured rounds (…AllFeaturesProcess; serves its profiles)")

// daemonLogLevel is the --log-level of the real binary
// …AllFeaturesProcess runs: info, as a node runs it; warn leaves out the
// lines of every creation, stop, quota lift and pod release, and with
// them the log goroutine's wake and its pipe write (cat's wake) that each
// creation makes: how much of the added time logging is (issue 45).
var daemonLogLevel = flag.String("daemon.loglevel", "info", "the --log-level of the real binary …AllFeaturesProcess runs")

// runtimeHistogramKey is a bucket of a runtime/metrics histogram.
type runtimeHistogramKey struct{ lo, hi float64 }

// daemonRuntimeMetrics is one answer of the daemon's
// /debug/runtime-metrics: its counters, and its histograms' counts by
// bucket.
type daemonRuntimeMetrics struct {
	values map[string]float64
	hists  map[string]map[runtimeHistogramKey]uint64
}

func (d *benchDaemon) readRuntimeMetrics(b *testing.B) daemonRuntimeMetrics {
	b.Helper()
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + d.pprof + "/debug/runtime-metrics")
	require.NoError(b, err, "reading the daemon's runtime metrics")
	defer resp.Body.Close()
	require.Equal(b, http.StatusOK, resp.StatusCode, "reading the daemon's runtime metrics")
	m := daemonRuntimeMetrics{values: map[string]float64{}, hists: map[string]map[runtimeHistogramKey]uint64{}}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch len(f) {
		case 2:
			v, err := strconv.ParseFloat(f[1], 64)
			require.NoError(b, err, "the daemon's runtime metric %q", sc.Text())
			m.values[f[0]] = v
		case 4:
			lo, err1 := strconv.ParseFloat(f[1], 64)
			hi, err2 := strconv.ParseFloat(f[2], 64)
			n, err3 := strconv.ParseUint(f[3], 10, 64)
			require.NoError(b, err1, "%q", sc.Text())
			require.NoError(b, err2, "%q", sc.Text())
			require.NoError(b, err3, "%q", sc.Text())
			if m.hists[f[0]] == nil {
				m.hists[f[0]] = map[runtimeHistogramKey]uint64{}
			}
			m.hists[f[0]][runtimeHistogramKey{lo, hi}] = n
		default:
			b.Fatalf("the daemon's runtime metrics: a line of neither form: %q", sc.Text())
		}
	}
	require.NoError(b, sc.Err())
	return m
}

// histogramDeltaQuantile is the upper bound of the bucket holding
// quantile q of what a histogram counted between before and after.
func histogramDeltaQuantile(before, after map[runtimeHistogramKey]uint64, q float64) float64 {
	keys := slices.SortedFunc(func(yield func(runtimeHistogramKey) bool) {
		for k := range after {
			if !yield(k) {
				return
			}
		}
	}, func(a, c runtimeHistogramKey) int {
		switch {
		case a.hi < c.hi:
			return -1
		case a.hi > c.hi:
			return 1
		}
		return 0
	})
	buckets := make([]float64, 0, len(keys)+1)
	counts := make([]uint64, 0, len(keys))
	buckets = append(buckets, 0)
	for _, k := range keys {
		buckets = append(buckets, k.hi)
		counts = append(counts, after[k]-before[k])
	}
	return histogramQuantile(buckets, counts, q)
}

// gcTraceLine is a line GODEBUG=gctrace=1 writes per GC cycle.
var gcTraceLine = regexp.MustCompile(`(?m)^gc \d+ @`)

// runtimeRounds reads the daemon's runtime metrics and its log's length as
// the measured rounds start and returns what reports them over the
// rounds (daemonRuntime); nothing when it is off.
func (d *benchDaemon) runtimeRounds(b *testing.B) func(rounds int) {
	b.Helper()
	if !*daemonRuntime {
		return func(int) {}
	}
	before := d.readRuntimeMetrics(b)
	logFrom := fileSize(d.log)
	return func(rounds int) {
		after := d.readRuntimeMetrics(b)
		const sched = "/sched/latencies:seconds"
		b.ReportMetric(histogramDeltaQuantile(before.hists[sched], after.hists[sched], 0.5)*1e6, "daemon-sched-latency-median-µs")
		b.ReportMetric(histogramDeltaQuantile(before.hists[sched], after.hists[sched], 0.99)*1e6, "daemon-sched-latency-p99-µs")
		const gcCPU, allCPU = "/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/total:cpu-seconds"
		if total := after.values[allCPU] - before.values[allCPU]; total > 0 {
			b.ReportMetric((after.values[gcCPU]-before.values[gcCPU])/total, "daemon-gc-cpu-fraction")
		}
		// The log is written by another process (cat): give it a moment.
		time.Sleep(200 * time.Millisecond)
		if lines := gcTraceLines(d.log, logFrom); lines >= 0 {
			b.ReportMetric(float64(lines)*1000/float64(max(rounds, 1)), "daemon-gctrace-per-1k-rt")
		}
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// gcTraceLines counts the GC trace lines in path after offset from; -1
// when the daemon's environment did not ask for them.
func gcTraceLines(path string, from int64) int {
	if !slices.ContainsFunc(daemonEnv, func(kv string) bool {
		return strings.HasPrefix(kv, "GODEBUG=") && strings.Contains(kv, "gctrace=1")
	}) {
		return -1
	}
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return -1
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return -1
	}
	return len(gcTraceLine.FindAll(buf.Bytes(), -1))
}

// keepDaemonLog copies the daemon's log into the profiles' directory
// (-daemon.profile), for its GC trace lines when it ran with
// GODEBUG=gctrace=1.
func (d *benchDaemon) keepDaemonLog(b *testing.B) {
	if *daemonProfile == "" {
		return
	}
	out, err := os.ReadFile(d.log)
	if err != nil {
		b.Logf("keeping the daemon's log: %v", err)
		return
	}
	base := strings.NewReplacer("/", "_", "=", "").Replace(b.Name())
	if err := os.WriteFile(fmt.Sprintf("%s/%s.daemon.log", *daemonProfile, base), out, 0o644); err != nil {
		b.Logf("keeping the daemon's log: %v", err)
	}
}
