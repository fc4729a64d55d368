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
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(samples[len(samples)/2]), "median-µs")
	b.ReportMetric(us(samples[len(samples)*99/100]), "p99-µs")
}
