package plugin

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
)

// allocsKeep is how many later creations a measured container of
// BenchmarkCreateContainerAllocs runs through before it is removed, as in
// the round trips (allFeaturesKeep).
const allocsKeep = 32

// BenchmarkCreateContainerAllocs counts what nri-cpupool itself allocates
// per creation (issue 45: allocations per round trip flat across sizes),
// at 0, 1,000 and 5,000 running on the 384-CPU node, without the runtime,
// ttRPC and the background passes whose timing makes the round trip's
// count (allocs-per-rt) vary from run to run: the CreateContainer handler
// (handler-allocs) and the state writer's write that carries the creation
// to the file (write-allocs: collect under the lock, encode, write and
// rename a real state file), each counted exactly (runtime.ReadMemStats)
// with the writer's own goroutine stopped and the sandbox pinner idle
// (measureCreationAllocs), the median over the creations.
// Each measured container (2 CPUs, exclusive, a 1 GiB memory limit
// counted against a per-node reserve) runs through the next allocsKeep
// creations, then it and its pod are stopped and removed off the count.
// allocs-per-creation is the sum.
func BenchmarkCreateContainerAllocs(b *testing.B) {
	for _, running := range []int{0, 1000, 5000} {
		b.Run(fmt.Sprintf("running=%d", running), func(b *testing.B) {
			p := allocsPlugin(b, running)
			handler, write := measureCreationAllocs(b, p, b.N)
			h, w := median(handler), median(write)
			b.ReportMetric(h, "handler-allocs")
			b.ReportMetric(w, "write-allocs")
			b.ReportMetric(h+w, "allocs-per-creation")
		})
	}
}

// allocsPlugin is nri-cpupool on the 384-CPU node with memory accounting,
// a state file in a temporary directory, and running containers (a
// quarter 1-CPU exclusive, or fewer where they would not fit: see
// exclusiveSpacing; the rest infra), written to the file. Its writer's
// goroutine is stopped: measureCreationAllocs writes on its own
// goroutine, so that nothing else allocates meanwhile.
func allocsPlugin(tb testing.TB, running int) *Plugin {
	tb.Helper()
	node := largeNode
	node.config += "\nmemory: {reservedPerNode: 1Gi}\n"
	cfg, topo := benchNode(tb, node)
	cfg.StateFile = filepath.Join(tb.TempDir(), "state.json")
	log := logrus.New()
	log.SetOutput(io.Discard)
	p, err := New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	require.NoError(tb, err)
	tb.Cleanup(p.Close)
	ctx := context.Background()
	_, err = p.Synchronize(ctx, nil, nil)
	require.NoError(tb, err)
	p.writer.halt()
	every := exclusiveSpacing(running, 384, allocsKeep)
	for i := 0; i < running; i++ {
		var ann map[string]string
		if i%every == every-1 {
			ann = map[string]string{"pool.cpupool.dev": "exclusive"}
		}
		pod := &api.PodSandbox{Id: "sb" + id(i), Uid: "u" + id(i), Name: "p" + id(i), Namespace: "ns", Annotations: ann}
		require.NoError(tb, p.RunPodSandbox(ctx, pod))
		_, _, err := p.CreateContainer(ctx, pod, benchContainer("bg"+id(i), 1000))
		require.NoError(tb, err, "running container %d", i)
	}
	require.NoError(tb, p.writer.write())
	return p
}

// measureCreationAllocs creates n measured containers on p and returns the
// objects allocated by each creation's handler and by the write that
// follows it. Each creation waits first for the sandbox pinner to finish
// what was asked of it (the new sandbox's pin, the last creation's pod
// quota, up to podQuotaDelay later), so that its round does not run beside
// the handler: unsettled, on a loaded machine, it did in enough creations
// to move the median (54 instead of 40 at 0 and 1,000 running). The
// pinner's own work per creation is then counted by the round trip's
// allocs-per-rt, not here. A count is still sometimes a little high: when
// the handler's goroutine resumes on another P after waiting (for the
// pinner, or the writer's I/O), it misses that P's sync.Pool caches
// (logrus's among them) and allocates anew, 2 more objects in most
// creations with 4 Ps (a reviewer's measurement, 2026-12-06); read the
// medians, or run with GOMAXPROCS 1 as TestCreationHandlerAllocations does.
func measureCreationAllocs(tb testing.TB, p *Plugin, n int) (handler, write []float64) {
	tb.Helper()
	ctx := context.Background()
	var ms runtime.MemStats
	count := func() uint64 {
		runtime.ReadMemStats(&ms) // exact, unlike runtime/metrics' count, which lags by what each P has cached
		return ms.Mallocs
	}
	type created struct {
		pod *api.PodSandbox
		ctr *api.Container
	}
	var live []created
	b, _ := tb.(*testing.B)
	if b != nil {
		b.ResetTimer()
	}
	for i := 0; i < n; i++ {
		pod := &api.PodSandbox{Id: "sb-m" + id(i), Uid: "u-m" + id(i), Name: "m" + id(i), Namespace: "ns",
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}
		ctr := benchContainer("m-"+id(i), 2000)
		ctr.Linux.Resources.Memory = &api.LinuxMemory{Limit: api.Int64(1 << 30)}
		require.NoError(tb, p.RunPodSandbox(ctx, pod))
		p.waitSandboxesPinned()
		before := count()
		_, _, err := p.CreateContainer(ctx, pod, ctr)
		mid := count()
		require.NoError(tb, err)
		require.NoError(tb, p.writer.write())
		after := count()
		handler = append(handler, float64(mid-before))
		write = append(write, float64(after-mid))
		live = append(live, created{pod, ctr})
		if len(live) > allocsKeep {
			old := live[0]
			live = live[1:]
			_, err := p.StopContainer(ctx, old.pod, old.ctr)
			require.NoError(tb, err)
			require.NoError(tb, p.RemoveContainer(ctx, old.pod, old.ctr))
			require.NoError(tb, p.StopPodSandbox(ctx, old.pod))
			require.NoError(tb, p.RemovePodSandbox(ctx, old.pod))
			require.NoError(tb, p.writer.write())
		}
	}
	if b != nil {
		b.StopTimer()
	}
	return handler, write
}

// median is the middle of counts (which it sorts).
func median(counts []float64) float64 {
	slices.Sort(counts)
	return counts[len(counts)/2]
}

// TestCreationAllocationsFlat: what nri-cpupool allocates for a creation
// (its handler, and the state write that carries it to the file) does not
// grow with the containers already running (issue 45). The state file
// holds every container, so a writer that encoded all of them again, or a
// handler that walked them, would allocate in proportion: with 2,000
// running, thousands more. The bound leaves room for what does vary a
// little (longer CPU lists to write out on a fuller node, another
// goroutine's allocation in a window).
func TestCreationAllocationsFlat(t *testing.T) {
	const creations = allocsKeep + 9 // some of them after removals
	medians := func(running int) (handler, write float64) {
		h, w := measureCreationAllocs(t, allocsPlugin(t, running), creations)
		return median(h), median(w)
	}
	h0, w0 := medians(0)
	h2, w2 := medians(2000)
	t.Logf("allocations per creation, 0 / 2,000 running: handler %.0f / %.0f, state write %.0f / %.0f", h0, h2, w0, w2)
	require.LessOrEqual(t, h2, h0*1.25+10, "the CreateContainer handler allocates more with 2,000 containers running (%.0f) than with none (%.0f)", h2, h0)
	require.LessOrEqual(t, w2, w0*1.25+10, "the state write after a creation allocates more with 2,000 containers running (%.0f) than with none (%.0f)", w2, w0)
}

// handlerAllocsBound is the most objects the CreateContainer handler may
// allocate for a creation (the median of TestCreationHandlerAllocations,
// which runs with GOMAXPROCS 1 so that the count does not depend on the
// machine's cores: see measureCreationAllocs): 40 on 2026-12-06 (session
// 56; 71 before that session's changes), plus one. 9 of the 40 are logrus
// formatting the decision line on the handler's path, which the daemon's
// logsink.Deferred does after the reply instead.
const handlerAllocsBound = 41

// handlerAllocsBoundRace is handlerAllocsBound under the race detector
// (raceBuild; `make test` runs the tests so): medians of 46 to 48 in 6
// runs on 2026-12-06 with every P, 45 and 46 in 4 with GOMAXPROCS 1, plus
// a margin for the race detector's random drops from sync.Pool.
const handlerAllocsBoundRace = 50

// TestCreationHandlerAllocations: what the CreateContainer handler
// allocates for an exclusive creation with memory accounting on the
// 384-CPU node stays at most handlerAllocsBound (issue 45: remove work
// from the reply's path, and keep it removed). A change that adds
// allocations there raises the bound with its reason, or finds another
// way.
func TestCreationHandlerAllocations(t *testing.T) {
	bound := handlerAllocsBound
	if raceBuild {
		bound = handlerAllocsBoundRace
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	h, _ := measureCreationAllocs(t, allocsPlugin(t, 0), allocsKeep+9)
	got := median(h)
	t.Logf("CreateContainer handler: %.0f allocations per creation (median; bound %d, race detector %v)", got, bound, raceBuild)
	require.LessOrEqual(t, got, float64(bound),
		"the CreateContainer handler allocates %.0f objects per creation, more than %d: see BenchmarkCreateContainerAllocs and its allocation profile", got, bound)
}
