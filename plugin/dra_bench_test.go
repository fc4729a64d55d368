package plugin

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/cpupool/nri-cpupool/internal/benchutil"
)

// BenchmarkCreateContainerRoundTripDRA is BenchmarkCreateContainerRoundTrip
// with the DRA driver on (running=200: infra containers, as the exclusive
// pools go through claims): each measured creation is the container of a
// claim of 2 CPUs, which shows its token, prepared off the clock as the
// kubelet prepares it before the sandbox. Reports as measurePaired does.
func BenchmarkCreateContainerRoundTripDRA(b *testing.B) {
	noop, ours := newFakeRuntime(b, false), newFakeRuntime(b, false)
	startNoop(b, noop)
	n := startDRAOn(b, ours, testNode{fixture: largeNode.fixture, config: largeNode.config + "\ndra: {enabled: true}\n"})
	for _, f := range []*fakeRuntime{noop, ours} {
		for i := 0; i < 200; i++ {
			_, _, err := f.createContainer(f.runPod(podSpec{name: "run" + id(i)}), "c", 1000)
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	pods := map[*fakeRuntime][]*api.PodSandbox{}
	for i := 0; i < b.N; i++ {
		for _, f := range []*fakeRuntime{noop, ours} {
			pods[f] = append(pods[f], f.runPod(podSpec{name: "bench" + strconv.Itoa(i)}))
		}
	}
	if ours.settle != nil {
		ours.settle()
	}
	samples := map[*fakeRuntime][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		uid := "uid-" + strconv.Itoa(i)
		env := n.prepare(b, uid, i%8, 2, pods[ours][i])
		b.StartTimer()
		order := []*fakeRuntime{noop, ours}
		if i%2 == 1 {
			order[0], order[1] = ours, noop
		}
		for _, f := range order {
			start := time.Now()
			ctr, _, err := f.createWithEnv(pods[f][i], "c", 10, env...)
			samples[f] = append(samples[f], time.Since(start))
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			f.stopContainer(ctr)
			f.removeContainer(ctr)
			f.removePod(pods[f][i])
			if f == ours {
				if _, err := n.driver.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: types.UID(uid)}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	added := make([]time.Duration, b.N)
	for i := range added {
		added[i] = samples[ours][i] - samples[noop][i]
	}
	addedMedian, _ := benchutil.Latency(added)
	b.ReportMetric(addedMedian, "added-median-µs")
	benchutil.ReportLatency(b, samples[ours])
	noopMedian, noopP99 := benchutil.Latency(samples[noop])
	b.ReportMetric(noopMedian, "noop-median-µs")
	b.ReportMetric(noopP99, "noop-p99-µs")
}
