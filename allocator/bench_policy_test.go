package allocator

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/benchutil"
	"github.com/cpupool/nri-cpupool/numamem"
)

// policyAllFeatures is the plugin's issue 45 configuration (every
// isolation feature on, see plugin's allFeatures) on the 384-CPU node,
// with an allowedNamespaces list for Allowed to read.
const policyAllFeatures = `isolatedCPUs: "1-191,193-383"
guaranteedExclusive: true
allowedNamespaces: {exclusive: [telco, "*"], shared: ["*"]}
memory: {reservedPerNode: 1Gi}
pools: {exclusive: {irqIsolation: optOut, isolatedPartition: optOut, housekeeping: held}}
power:
  classes:
    low-latency: {resumeLatencyUS: n/a, governor: performance}
    saver: {resumeLatencyUS: 100}
  pools:
    exclusive: {class: low-latency, allowed: [saver], idleClass: saver}
    infra: {class: saver}
`

// kubeletPodAnnotations are the annotations the kubelet itself puts on
// every pod the runtime (and so NRI) sees, none of them ours.
func kubeletPodAnnotations() map[string]string {
	return map[string]string{
		"kubernetes.io/config.seen":                        "2026-12-07T19:21:03.123456789Z",
		"kubernetes.io/config.source":                      "api",
		"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Pod"}`,
	}
}

// policyContainers are the containers Policy.Request is measured with:
// the handler benchmarks' (a pool annotation alone), the same among the
// kubelet's annotations, one the QoS rule makes exclusive (none of ours),
// and one that sets every annotation an exclusive container may, each
// at the scope a tenant would use.
func policyContainers() []struct {
	name string
	c    Container
} {
	withKubelet := func(ours map[string]string) map[string]string {
		ann := kubeletPodAnnotations()
		for k, v := range ours {
			ann[k] = v
		}
		return ann
	}
	base := Container{ID: "ctr-1", Pod: PodRef{Namespace: "telco", Name: "pod-1", UID: "uid-1"}, Name: "c",
		QoS: QoSGuaranteed, MilliCPU: 2000, Demand: numamem.Demand{Memory: 1 << 30}}
	with := func(ann map[string]string) Container {
		c := base
		c.Annotations = ann
		return c
	}
	return []struct {
		name string
		c    Container
	}{
		{"bench-pool", with(map[string]string{AnnotationPool: "exclusive"})},
		{"kubelet-pool", with(withKubelet(map[string]string{AnnotationPool: "exclusive"}))},
		{"kubelet-qos", with(kubeletPodAnnotations())},
		{"every-feature", with(withKubelet(map[string]string{
			AnnotationPool + "/container.c":                 "exclusive",
			AnnotationNUMA + "/pod":                         "0",
			AnnotationDevice + "/container.c":               "/sys/bus/pci/devices/0000:3b:00.0",
			AnnotationHideHyperthreads:                      "true",
			AnnotationFullPCPUsOnly + "/pod":                "true",
			AnnotationDistributeAcrossNUMA + "/container.c": "false",
			AnnotationDisableCPUQuota + "/container.c":      "true",
			AnnotationIRQIsolation + "/container.c":         "true",
			AnnotationIsolatedPartition + "/container.c":    "false",
			AnnotationPowerClass + "/container.c":           "saver",
			AnnotationSharedCPUs + "/container.c":           "true",
		}))},
	}
}

// BenchmarkPolicyRequest is Policy.Request alone (the request phase of a
// creation, issue 45), warm (calls back to back) and cold (32 MiB
// written before each call, as BenchmarkExclusiveDecisionCold does, so
// that it finds its caches and TLB holding other lines, as the daemon's
// handler does), for each of policyContainers. It reports the calls'
// median and p99 (median-µs, p99-µs: cold, ns/op also counts the
// eviction) and, with -benchmem, the allocations of a call.
func BenchmarkPolicyRequest(b *testing.B) {
	evict := benchutil.NewEvictor()
	p := NewPolicy(parseConfig(b, policyAllFeatures), topology(b, largeNode))
	resolve := func(string) (int, error) { return 0, nil }
	for _, tc := range policyContainers() {
		if _, err := p.Request(tc.c, resolve); err != nil {
			b.Fatalf("%s: %v", tc.name, err)
		}
		for _, cold := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/cold=%v", tc.name, cold), func(b *testing.B) {
				b.ReportAllocs()
				took := make([]time.Duration, 0, b.N)
				var sink cpuset.CPUSet
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if cold {
						evict.Evict()
					}
					start := time.Now()
					req, err := p.Request(tc.c, resolve)
					took = append(took, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					sink = req.PreferNUMA
				}
				b.StopTimer()
				_ = sink
				benchutil.ReportLatency(b, took)
			})
		}
	}
}

// BenchmarkPolicyRequestColdParts tells what of a cold Policy.Request's
// time is the container's own data and what the code and the structures
// every request reads (the policy, its config, the runtime's map code):
// the kubelet's pod with a pool annotation, timed after 32 MiB written
// (cold), after that and a pass over its annotations' map (its own map
// warmed), after that and another container's request (the code and the
// shared structures warmed, its own map not), and after that and the
// same request (all warmed: what the eviction leaves, its stack and
// TLB). It reports the calls' median and p99.
func BenchmarkPolicyRequestColdParts(b *testing.B) {
	evict := benchutil.NewEvictor()
	p := NewPolicy(parseConfig(b, policyAllFeatures), topology(b, largeNode))
	c := policyContainers()[1].c
	other := c
	other.Annotations = map[string]string{AnnotationPool: "exclusive", "example.com/team": "a"}
	resolve := func(string) (int, error) { return 0, nil }
	var sink int
	for _, v := range []struct {
		name string
		pre  func()
	}{
		{"cold", func() {}},
		{"own-map-warmed", func() {
			for k, v := range c.Annotations {
				sink += len(k) + len(v)
			}
		}},
		{"other-request-first", func() { r, _ := p.Request(other, resolve); sink += len(r.Pool) }},
		{"same-request-first", func() { r, _ := p.Request(c, resolve); sink += len(r.Pool) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				evict.Evict()
				v.pre()
				start := time.Now()
				r, err := p.Request(c, resolve)
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				sink += len(r.Pool)
			}
			benchutil.ReportLatency(b, took)
		})
	}
	_ = sink
}
