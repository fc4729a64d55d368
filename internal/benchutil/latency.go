// Package benchutil holds what the project's benchmarks share.
package benchutil

import (
	"sort"
	"testing"
	"time"
)

// ReportLatency adds the median and p99 of per-operation samples to the
// benchmark's result line (read by tools/benchtable).
func ReportLatency(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	median, p99 := Latency(samples)
	b.ReportMetric(median, "median-µs")
	b.ReportMetric(p99, "p99-µs")
}

// Latency returns the median and p99 of samples in microseconds, sorting
// them.
func Latency(samples []time.Duration) (median, p99 float64) {
	if len(samples) == 0 {
		return 0, 0
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return us(samples[len(samples)/2]), us(samples[len(samples)*99/100])
}
