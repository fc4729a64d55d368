package cli

// /debug/runtime-metrics on run's --pprof-address: the Go runtime's own
// counters that explain a creation's latency (issue 45) and that the
// metrics address does not carry at a useful resolution: how long a
// runnable goroutine waited to run (/sched/latencies:seconds, whose
// Prometheus export client_golang rebuckets to powers of ten: 1, 10,
// 100 µs, too coarse for a median of a few µs), the GC's cycles and CPU,
// the heap goal. Served beside the profiles, so off by default and on a
// loopback address or a unix socket only.

import (
	"fmt"
	"io"
	"net/http"
	"runtime/metrics"
)

// runtimeMetricNames are what /debug/runtime-metrics answers, in order.
var runtimeMetricNames = []string{
	"/gc/cycles/total:gc-cycles",
	"/gc/heap/goal:bytes",
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/sched/latencies:seconds",
}

// serveRuntimeMetrics answers the runtime's metrics, read at the request,
// as text: a line "NAME VALUE" per counter or gauge, and per histogram a
// line "NAME LOW HIGH COUNT" for each bucket that counted anything (LOW
// and HIGH in the metric's unit, either may be -Inf or +Inf; COUNT since
// the process started). A reader takes two answers' difference for what
// happened between them.
func serveRuntimeMetrics(w http.ResponseWriter, _ *http.Request) {
	samples := make([]metrics.Sample, len(runtimeMetricNames))
	for i, name := range runtimeMetricNames {
		samples[i].Name = name
	}
	metrics.Read(samples)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	writeRuntimeMetrics(w, samples)
}

func writeRuntimeMetrics(w io.Writer, samples []metrics.Sample) {
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			fmt.Fprintf(w, "%s %d\n", s.Name, s.Value.Uint64())
		case metrics.KindFloat64:
			fmt.Fprintf(w, "%s %g\n", s.Name, s.Value.Float64())
		case metrics.KindFloat64Histogram:
			h := s.Value.Float64Histogram()
			for i, c := range h.Counts {
				if c > 0 {
					fmt.Fprintf(w, "%s %g %g %d\n", s.Name, h.Buckets[i], h.Buckets[i+1], c)
				}
			}
		}
		// KindBad: a name this Go does not know; nothing to say.
	}
}
