package allocator

import (
	"fmt"
	"testing"
	"time"

	"github.com/cpupool/nri-cpupool/internal/benchutil"
	"github.com/cpupool/nri-cpupool/numamem"
)

// BenchmarkExclusiveDecisionCold is issue 45's cold decision in the
// allocator alone: a 2-CPU exclusive placement with a 1 GiB memory limit
// (what the handler benchmarks create) on the 384-CPU node with memory
// pinned, empty and at 50% occupancy, with 32 MiB written before each
// decision so that it finds its caches and TLB holding other lines, as the
// daemon's handler does (BenchmarkCreateContainerHandlerAllFeaturesClocks,
// between=evict). The release is not timed. It reports the decisions'
// mean and median (cold-mean-µs, cold-median-µs).
func BenchmarkExclusiveDecisionCold(b *testing.B) {
	evict := benchutil.NewEvictor()
	const config = "isolatedCPUs: \"1-191,193-383\"\npinMemory: true\nmemory: {reservedPerNode: 1Gi}"
	for _, fill := range []string{"empty", "half"} {
		b.Run("occupancy="+fill, func(b *testing.B) {
			a := newAllocator(b, largeNode, config)
			for i := 0; fill == "half" && a.FreeCPUs("exclusive").Size() > a.Layout().Exclusive.Size()/2; i++ {
				if _, err := a.Allocate(exclusive(fmt.Sprintf("fill%d", i), 1+i%8)); err != nil {
					b.Fatal(err)
				}
			}
			took := timeDecisions(b, a, evict, numamem.Demand{Memory: 1 << 30})
			var sum time.Duration
			for _, d := range took {
				sum += d
			}
			b.ReportMetric(float64(sum.Nanoseconds())/1e3/float64(len(took)), "cold-mean-µs")
			median, _ := benchutil.Latency(took)
			b.ReportMetric(median, "cold-median-µs")
		})
	}
}

// BenchmarkExclusiveDecisionColdByShape is like BenchmarkExclusiveDecisionCold
// but without memory (no limit, memory not pinned): a 2-CPU exclusive
// placement on an empty node of 16, 384 and 1,024 CPUs, warm (decisions
// back to back) and cold (32 MiB written before each). It tells what of
// the cold decision's time the node's size brings (its per-CPU and
// per-core structures) and what any node pays (the code and the
// allocator's fixed structures, cold). It reports the decisions' median
// and p99 (median-µs, p99-µs), the figures to read: cold, ns/op also
// counts the eviction, about 1 ms.
func BenchmarkExclusiveDecisionColdByShape(b *testing.B) {
	evict := benchutil.NewEvictor()
	shapes := []struct{ name, fixture, config string }{
		{"cpus=16", "desktop-8c16t", `isolatedCPUs: "1-7,9-15"`},
		{"cpus=384", largeNode, `isolatedCPUs: "1-191,193-383"`},
		{"cpus=1024", "epyc-2s-1024", `isolatedCPUs: "1-511,513-1023"`},
	}
	for _, sh := range shapes {
		for _, cold := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/cold=%v", sh.name, cold), func(b *testing.B) {
				a := newAllocator(b, sh.fixture, sh.config)
				var ev benchutil.Evictor // nil: warm
				if cold {
					ev = evict
				}
				benchutil.ReportLatency(b, timeDecisions(b, a, ev, numamem.Demand{}))
			})
		}
	}
}

// timeDecisions times b.N 2-CPU exclusive decisions of demand, each
// released untimed, with the caches evicted before each unless evict is
// nil, and returns their times in order.
func timeDecisions(b *testing.B, a *Allocator, evict benchutil.Evictor, demand numamem.Demand) []time.Duration {
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := exclusive(fmt.Sprintf("x%d", i), 2)
		r.Demand = demand
		if evict != nil {
			evict.Evict()
		}
		start := time.Now()
		_, err := a.Allocate(r)
		took = append(took, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		a.Release(r.ID)
	}
	b.StopTimer()
	return took
}
