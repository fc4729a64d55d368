package plugin

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/internal/benchutil"
	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// allFeatures turns on every isolation feature at once (issue 45): IRQs
// kept off, isolated partitions and host processes held off every
// exclusive container's CPUs, power classes on every CPU, and memory
// counted against a per-node reserve (a measured container carries a
// memory limit, see BenchmarkCreateContainerRoundTripAllFeatures).
const allFeatures = `
memory: {reservedPerNode: 1Gi}
pools: {exclusive: {irqIsolation: optOut, isolatedPartition: optOut, housekeeping: held}}
power:
  classes:
    low-latency: {resumeLatencyUS: n/a, governor: performance}
    saver: {resumeLatencyUS: 100}
  pools:
    exclusive: {class: low-latency, idleClass: saver}
    infra: {class: saver}
`

// allFeaturesKeep is how many later creations a measured container runs
// through, so that the background passes find it running (partition,
// IRQs, housekeeping) and undo it after.
const allFeaturesKeep = 32

// allFeaturesShape is a node of issue 45's matrix.
type allFeaturesShape struct {
	node       testNode
	cpus, numa int
}

// allFeaturesNode is the shape's node with every isolation feature on.
func (s allFeaturesShape) allFeaturesNode() testNode {
	return testNode{fixture: s.node.fixture, config: s.node.config + allFeatures}
}

// forAllFeaturesSizes runs one sub-benchmark per size of issue 45's
// matrix: the 384- and the 1,024-CPU node with 0, 200, 1,000 and 5,000
// running containers.
func forAllFeaturesSizes(b *testing.B, run func(b *testing.B, shape allFeaturesShape, running int)) {
	for _, shape := range []allFeaturesShape{{largeNode, 384, 8}, {bigNode, 1024, 4}} {
		for _, running := range []int{0, 200, 1000, 5000} {
			b.Run(fmt.Sprintf("cpus=%d/running=%d", shape.cpus, running), func(b *testing.B) { run(b, shape, running) })
		}
	}
}

// allFeaturesHost writes the host files nri-cpupool's node has beside its
// sysfs fixture, for every feature to act on: 512 NIC queue IRQs in its
// /proc, the workqueue mask and the top-level cgroups housekeeping
// narrows (housekeepNode).
func allFeaturesHost(b *testing.B, ours *fakeRuntime, shape allFeaturesShape) {
	procfixture.Write(b, ours.procRoot(), manyIRQs(shape.cpus, shape.numa, 512))
	housekeepNode(b, ours, shape.node.fixture, shape.cpus)
}

// fillAllFeatures runs the running containers behind both runtimes:
// infra members with every fourth a 1-CPU exclusive one, or every eighth
// or sixteenth where a quarter would not fit (exclusiveSpacing), the
// cgroups of nri-cpupool's with a 6.7+ kernel's cpuset files, as are
// those of the b.N containers measureRounds will create; and from then on
// every container both runtimes create carries a 1 GiB memory limit.
func fillAllFeatures(b *testing.B, noop, ours *fakeRuntime, cpus, running int) {
	every := exclusiveSpacing(running, cpus, allFeaturesKeep)
	fillNodeEvery(b, noop, running, every)
	for i := 0; i < running; i++ {
		var ann map[string]string
		if i%every == every-1 {
			ann = map[string]string{"pool.cpupool.dev": "exclusive"}
		}
		pod := ours.runPod(podSpec{name: "run" + id(i), annotations: ann})
		runcWillCreate(b, ours, pod, "c")
		_, _, err := ours.createContainer(pod, "c", 1000)
		require.NoError(b, err, "running container %d", i)
	}
	for i := 0; i < b.N; i++ {
		// measureRounds' pods and containers, by name.
		partitionable(b, ours, "/kubepods/poduid-bench"+strconv.Itoa(i)+"/ctr-bench"+strconv.Itoa(i)+"-c")
	}
	for _, f := range []*fakeRuntime{noop, ours} {
		f.mu.Lock()
		f.dress = func(c *api.Container) { c.Linux.Resources.Memory = &api.LinuxMemory{Limit: api.Int64(1 << 30)} }
		f.mu.Unlock()
	}
}

// BenchmarkCreateContainerRoundTripAllFeatures is issue 45's matrix: the
// paired round trip (measurePairedKeeping: nri-cpupool against the no-op
// plugin, alternating, over real ttRPC) with every isolation feature on
// (allFeatures), on cgroup v2, on the 384- and the 1,024-CPU node with 0,
// 200, 1,000 and 5,000 running containers (fillAllFeatures). Each
// measured container (2 CPUs, a 1 GiB memory limit, behind both plugins)
// runs while the next 32 are created. Budgets: added ≤ 30 µs median and
// ≤ 150 µs at p99 (the p99 of nri-cpupool's round trips less the
// no-op's), allocations per round trip flat across sizes. Besides the
// round trip it reports what the findings in docs/performance.md rest on
// (latencyProbe).
//
// nri-cpupool runs in this process, beside the runtimes and the no-op
// plugin: its background passes and garbage collection share their Go
// scheduler. BenchmarkCreateContainerRoundTripAllFeaturesProcess is the
// same matrix with the real binary as its own process.
func BenchmarkCreateContainerRoundTripAllFeatures(b *testing.B) {
	forAllFeaturesSizes(b, func(b *testing.B, shape allFeaturesShape, running int) {
		noop, ours := newFakeRuntime(b, true), newFakeRuntime(b, true)
		allFeaturesHost(b, ours, shape)
		startNoop(b, noop)
		rp := startPlugin(b, ours, shape.allFeaturesNode(), statePath(ours))
		fillAllFeatures(b, noop, ours, shape.cpus, running)
		require.NoError(b, rp.p.FlushIsolation())
		firstAudit(b, rp.p)
		before := rp.p.isolation.Load().recon.Status()
		probe := startLatencyProbe(b, func() ([]*dto.MetricFamily, error) { return rp.p.Registry().Gather() }, false)
		samples := measurePairedKeeping(b, noop, ours, allFeaturesKeep)
		probe.report(b, len(samples[1]))
		after := rp.p.isolation.Load().recon.Status()
		b.ReportMetric(float64(after.Passes-before.Passes), "passes")
		b.ReportMetric(float64(after.Writes+after.Restores-before.Writes-before.Restores), "host-writes")
	})
}

// BenchmarkCreateContainerRoundTripAllFeaturesProcess is issue 45's
// matrix (BenchmarkCreateContainerRoundTripAllFeatures: the same sizes,
// features, fixtures and pairing) with nri-cpupool as a node runs it:
// the real binary (`nri-cpupool run`, built from this tree) in its own
// process, with the fixture's roots, serving its metrics, logging at
// info to a file. The no-op plugin is a process of its own too
// (noopProcess); the runtimes stay in this process. The round trip's figures are the same; the daemon's own
// (its CreateContainer handler time, GC cycles, heap goal, CPU and
// allocations per round, host file writes) are read from its /metrics
// before and after the measured rounds (latencyProbe); allocs-per-rt is
// then the runtime side's alone (this process, during nri-cpupool's
// creations). After the rounds it reports the daemon's resident and peak
// memory and the GOGC it ran with (reportMemory; -daemon.env gives the
// daemon alone an environment).
func BenchmarkCreateContainerRoundTripAllFeaturesProcess(b *testing.B) {
	bin := buildBinary(b)
	forAllFeaturesSizes(b, func(b *testing.B, shape allFeaturesShape, running int) {
		noop, ours := newFakeRuntime(b, true), newFakeRuntime(b, true)
		allFeaturesHost(b, ours, shape)
		if *noopProcess {
			startNoopProcess(b, noop)
			b.ReportMetric(1, "noop-own-process") // for benchtable's rows
		} else {
			startNoop(b, noop)
		}
		d := startDaemon(b, ours, daemonSpec{bin: bin, node: shape.allFeaturesNode(), logLevel: *daemonLogLevel, procRoot: true, metrics: true, pprof: *daemonProfile != "" || *daemonRuntime, clocks: *daemonClocks})
		fillAllFeatures(b, noop, ours, shape.cpus, running)
		d.waitHostFilesSettled(b)
		ours.profileRounds = func(rounds func() int64) func() { return d.profile(b, rounds) }
		// Read before the probe and after its report: the clocks' own
		// requests stay out of the daemon's CPU and allocations per round.
		clocks := d.clockRounds(b)
		daemonRT := d.runtimeRounds(b)
		probe := startLatencyProbe(b, d.gather, true)
		samples := measurePairedKeeping(b, noop, ours, allFeaturesKeep)
		probe.report(b, len(samples[1]))
		daemonRT(len(samples[1]))
		clocks()
		d.keepDaemonLog(b)
		d.reportMemory(b)
	})
}

// firstAudit starts the plugin's periodic audit, as serving its metrics
// does, and waits for its first report: the probe's first gather would
// start it otherwise, and its first run (a one-second sample, then a walk
// of every held CPU) would fall in the measured rounds, adding to their
// allocations in proportion to the exclusive containers running (43 to
// 132 per round over 100 rounds at 0 to 1,000 running). The real daemon
// audits from its start, so its first run falls in the fill; after it,
// one a minute.
func firstAudit(b *testing.B, p *Plugin) {
	b.Helper()
	p.startAuditing()
	a := p.auditor.Load()
	for deadline := time.Now().Add(10 * time.Second); a.last.Load() == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the plugin's first audit gave no report within 10 s")
		}
	}
}

// exclusiveSpacing is how far apart the running exclusive containers are
// (every fourth, eighth, ...): the closest that leaves room, on a node of
// cpus CPUs, for the measured 2-CPU containers that run at once (keep+1).
func exclusiveSpacing(running, cpus, keep int) int {
	every := 4
	for running/every+2*(keep+1) > cpus-8 {
		every *= 2
	}
	return every
}

// housekeepNode is housekeepLargeNode for any fixture shape of cpus CPUs.
func housekeepNode(b *testing.B, f *fakeRuntime, shape string, cpus int) {
	b.Helper()
	write := func(path, content string) {
		require.NoError(b, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(b, os.WriteFile(path, []byte(content+"\n"), 0o644))
	}
	write(filepath.Join(f.cgroupRoot, "cgroup.subtree_control"), "cpuset cpu memory")
	write(filepath.Join(f.cgroupRoot, "system", "cpuset.cpus"), "")
	write(filepath.Join(f.cgroupRoot, "service", "cpuset.cpus"), fmt.Sprintf("0-%d", cpus/2-1))
	write(filepath.Join(f.cgroupRoot, "kubepods", "cpuset.cpus"), "")
	write(filepath.Join(f.sysfsRoot(shape), housekeeping.WorkqueueMask), strings.TrimSuffix(strings.Repeat("ffffffff,", cpus/32), ","))
	write(filepath.Join(f.procRoot(), "sys/kernel/random/boot_id"), bootID)
	write(filepath.Join(f.procRoot(), "1/comm"), "init")
}

// latencyProbe reads, around a measured run, what issue 45's findings rest
// on, in the same run as the round trips: from this process's runtime,
// the garbage collector's cycles and CPU and the scheduler's latency
// (/sched/latencies:seconds: how long a runnable goroutine waited to run;
// over the runtimes and the no-op plugin, and nri-cpupool when it runs
// here); from nri-cpupool's metrics (gather), its own CreateContainer
// handler time (cpupool_handler_duration_seconds: its sum over its count,
// the decision with its lock wait), and, when it is its own process
// (daemon), that process's garbage collector, CPU and allocations, which
// its Go and process collectors export.
type latencyProbe struct {
	gather func() ([]*dto.MetricFamily, error)
	daemon bool
	before []rtmetrics.Sample
	// plugin is nri-cpupool's metrics before the run; idle, one scrape
	// earlier (the daemon's only): what a scrape itself costs the
	// daemon is their difference.
	plugin, idle []*dto.MetricFamily
}

var probeMetrics = []string{"/gc/cycles/total:gc-cycles", "/sched/latencies:seconds", "/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/total:cpu-seconds", "/gc/heap/goal:bytes"}

// daemonMetrics are the daemon's series latencyProbe reads: GC cycles,
// heap goal, CPU seconds, heap objects allocated.
const (
	daemonGCs    = "go_gc_duration_seconds"
	daemonGoal   = "go_memstats_next_gc_bytes"
	daemonCPU    = "process_cpu_seconds_total"
	daemonAllocs = "go_memstats_mallocs_total"
)

func startLatencyProbe(b *testing.B, gather func() ([]*dto.MetricFamily, error), daemon bool) *latencyProbe {
	b.Helper()
	pr := &latencyProbe{gather: gather, daemon: daemon}
	if daemon {
		pr.idle = pr.mustGather(b)
	}
	pr.plugin = pr.mustGather(b)
	pr.before = readProbeMetrics()
	return pr
}

func (pr *latencyProbe) mustGather(b *testing.B) []*dto.MetricFamily {
	b.Helper()
	mfs, err := pr.gather()
	require.NoError(b, err)
	return mfs
}

func readProbeMetrics() []rtmetrics.Sample {
	s := make([]rtmetrics.Sample, len(probeMetrics))
	for i, name := range probeMetrics {
		s[i].Name = name
	}
	rtmetrics.Read(s)
	return s
}

// report adds, for rounds round trips: gc-per-1k-rt (GC cycles of this
// process per 1,000 round trips of nri-cpupool), gc-cpu-fraction (the
// GC's share of this process's CPU), heap-goal-MiB,
// sched-latency-median-µs and sched-latency-p99-µs; handler-mean-µs and
// handler-median-below-µs; for a daemon, daemon-gc-per-1k-rt,
// daemon-heap-goal-MiB, daemon-cpu-µs-per-rt and daemon-allocs-per-rt
// (the daemon's CPU and heap allocations per round: its creation, the
// stop and removal of the container created allFeaturesKeep rounds
// before, its background work; a scrape's own CPU and allocations taken
// off; its CPU time is counted in clock ticks, 10 ms) and
// host-writes and host-passes (its host file writes and restores, and
// the passes that made them: each pass has costs of its own, whatever it
// writes).
func (pr *latencyProbe) report(b *testing.B, rounds int) {
	after := readProbeMetrics()
	plugin := pr.mustGather(b)
	perRound := func(v float64) float64 { return v / float64(max(rounds, 1)) }
	gcs := after[0].Value.Uint64() - pr.before[0].Value.Uint64()
	b.ReportMetric(perRound(float64(gcs)*1000), "gc-per-1k-rt")
	if total := after[3].Value.Float64() - pr.before[3].Value.Float64(); total > 0 {
		b.ReportMetric((after[2].Value.Float64()-pr.before[2].Value.Float64())/total, "gc-cpu-fraction")
	}
	b.ReportMetric(float64(after[4].Value.Uint64())/(1<<20), "heap-goal-MiB")
	h0, h1 := pr.before[1].Value.Float64Histogram(), after[1].Value.Float64Histogram()
	counts := make([]uint64, len(h1.Counts))
	for i := range counts {
		counts[i] = h1.Counts[i] - h0.Counts[i]
	}
	b.ReportMetric(histogramQuantile(h1.Buckets, counts, 0.5)*1e6, "sched-latency-median-µs")
	b.ReportMetric(histogramQuantile(h1.Buckets, counts, 0.99)*1e6, "sched-latency-p99-µs")
	sum0, count0, below0, _ := handlerTime(pr.plugin, "CreateContainer")
	sum, count, below, ok := handlerTime(plugin, "CreateContainer")
	if !ok || count <= count0 {
		b.Fatalf("nri-cpupool's CreateContainer histogram (cpupool_handler_duration_seconds) is missing or counted no creation (%d before, %d after)", count0, count)
	}
	n := count - count0
	b.ReportMetric((sum-sum0)/float64(n)*1e6, "handler-mean-µs")
	// The histogram's buckets are coarse (10, 25, 62.5, 156 µs...): the
	// bound below which half the handlers of the run replied.
	for _, le := range slices.Sorted(maps.Keys(below)) {
		if 2*(below[le]-below0[le]) >= n {
			b.ReportMetric(le*1e6, "handler-median-below-µs")
			break
		}
	}
	if !pr.daemon {
		return
	}
	delta := func(name string) float64 { return mustMetric(b, plugin, name) - mustMetric(b, pr.plugin, name) }
	scrape := func(name string) float64 { return mustMetric(b, pr.plugin, name) - mustMetric(b, pr.idle, name) }
	b.ReportMetric(perRound(delta(daemonGCs)*1000), "daemon-gc-per-1k-rt")
	b.ReportMetric(mustMetric(b, plugin, daemonGoal)/(1<<20), "daemon-heap-goal-MiB")
	b.ReportMetric(perRound((delta(daemonCPU)-scrape(daemonCPU))*1e6), "daemon-cpu-µs-per-rt")
	b.ReportMetric(perRound(delta(daemonAllocs)-scrape(daemonAllocs)), "daemon-allocs-per-rt")
	b.ReportMetric(hostFileChanges(b, plugin)-hostFileChanges(b, pr.plugin), "host-writes")
	b.ReportMetric(hostFilePasses(b, plugin)-hostFilePasses(b, pr.plugin), "host-passes")
}

// histogramQuantile is the upper bound of the bucket holding quantile q
// of a runtime/metrics histogram (counts[i] between buckets[i] and
// buckets[i+1]).
func histogramQuantile(buckets []float64, counts []uint64, q float64) float64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= want {
			return buckets[i+1]
		}
	}
	return buckets[len(buckets)-1]
}

// handlerTime is the sum (in seconds) and count of a handler's histogram
// among a plugin's metrics, and its cumulative bucket counts by upper
// bound (seconds); ok is false when the histogram is not there.
func handlerTime(mfs []*dto.MetricFamily, handler string) (sum float64, count uint64, below map[float64]uint64, ok bool) {
	for _, mf := range mfs {
		if mf.GetName() != "cpupool_handler_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "handler" && l.GetValue() == handler {
					h := m.GetHistogram()
					below = map[float64]uint64{}
					for _, bk := range h.GetBucket() {
						below[bk.GetUpperBound()] = bk.GetCumulativeCount()
					}
					return h.GetSampleSum(), h.GetSampleCount(), below, true
				}
			}
		}
	}
	return 0, 0, nil, false
}

// roundsProfile names a directory where measureRounds writes profiles of
// its measured creations alone (the setup, fills of up to 5,000
// containers, left out): <benchmark>.cpu.prof, .mutex.prof and .block.prof
// (every contention and every blocking event of 10 µs or more, recorded
// only meanwhile), .trace (runtime/trace), and .allocs.prof with every
// allocation made meanwhile (MemProfileRate 1 during the rounds; read it
// with `go tool pprof -sample_index=alloc_objects -diff_base
// <benchmark>.allocs-base.prof`, the same profile taken as they start). Issue 45's findings come
// from them; docs/performance.md tells how to run it.
var roundsProfile = flag.String("rounds.profile", "", "directory for profiles of measureRounds' measured creations alone")

// profileRounds starts the profiles roundsProfile asks for and returns
// what stops and writes them.
func profileRounds(b *testing.B) func() {
	dir := *roundsProfile
	if dir == "" {
		return func() {}
	}
	require.NoError(b, os.MkdirAll(dir, 0o755))
	base := filepath.Join(dir, strings.NewReplacer("/", "_", "=", "").Replace(b.Name()))
	cpu, err := os.Create(base + ".cpu.prof")
	require.NoError(b, err)
	require.NoError(b, pprof.StartCPUProfile(cpu))
	tr, err := os.Create(base + ".trace")
	require.NoError(b, err)
	require.NoError(b, trace.Start(tr))
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(int((10 * time.Microsecond).Nanoseconds()))
	writeAllocs := func(name string) {
		runtime.GC() // the profile holds what the last completed cycle saw
		f, err := os.Create(base + "." + name + ".prof")
		require.NoError(b, err)
		require.NoError(b, pprof.Lookup("allocs").WriteTo(f, 0))
		require.NoError(b, f.Close())
	}
	// Both written at rate 1, so that the records from before the rounds
	// (sampled at the usual rate) weigh the same in both and cancel out.
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	writeAllocs("allocs-base")
	return func() {
		writeAllocs("allocs")
		runtime.MemProfileRate = rate
		trace.Stop()
		pprof.StopCPUProfile()
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		require.NoError(b, tr.Close())
		require.NoError(b, cpu.Close())
		for _, name := range []string{"mutex", "block"} {
			f, err := os.Create(base + "." + name + ".prof")
			require.NoError(b, err)
			require.NoError(b, pprof.Lookup(name).WriteTo(f, 0))
			require.NoError(b, f.Close())
		}
	}
}

// fixedReplyPlugin answers every creation with the adjustment nri-cpupool
// gives a 2-CPU exclusive container (its cpuset, memory nodes and
// environment) without deciding anything: set against the no-op plugin,
// it is what the runtime and ttRPC take for carrying and applying such a
// reply, which no plugin giving one avoids.
type fixedReplyPlugin struct{ noopPlugin }

func (fixedReplyPlugin) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adj := &api.ContainerAdjustment{}
	adj.SetLinuxCPUSetCPUs("2-3")
	adj.SetLinuxCPUSetMems("0")
	adj.AddEnv(EnvCPUs, "2-3")
	adj.AddEnv(EnvMems, "0")
	adj.AddEnv(EnvPool, "exclusive")
	return adj, nil, nil
}

// BenchmarkCreateContainerRoundTripReplyCost splits what nri-cpupool adds
// to a creation (issue 45) at 0 running on the 384-CPU node, every
// isolation feature on: the no-op plugin, fixedReplyPlugin and
// nri-cpupool behind their own runtimes, in a new random order each round
// (measureRounds). reply-added-median-µs is what carrying nri-cpupool's
// reply costs (fixed less no-op, per round); plugin-added-median-µs what
// is left to the plugin (nri-cpupool less fixed); added-median-µs the sum
// (nri-cpupool less no-op).
func BenchmarkCreateContainerRoundTripReplyCost(b *testing.B) {
	noop, fixed, ours := newFakeRuntime(b, true), newFakeRuntime(b, true), newFakeRuntime(b, true)
	allFeaturesHost(b, ours, allFeaturesShape{largeNode, 384, 8})
	startNoop(b, noop)
	before := fixed.syncCount()
	s, err := stub.New(fixedReplyPlugin{}, stub.WithPluginName("fixed"), stub.WithPluginIdx("10"), stub.WithSocketPath(fixed.socket))
	require.NoError(b, err)
	require.NoError(b, s.Start(context.Background()))
	b.Cleanup(s.Stop)
	fixed.waitSynced(before)
	startPlugin(b, ours, allFeaturesShape{node: largeNode}.allFeaturesNode(), statePath(ours))
	for i := 0; i < b.N; i++ {
		partitionable(b, ours, "/kubepods/poduid-bench"+strconv.Itoa(i)+"/ctr-bench"+strconv.Itoa(i)+"-c")
	}
	samples, _ := measureRounds(b, []*fakeRuntime{noop, fixed, ours}, nil, allFeaturesKeep)
	diff := func(a, c int) float64 {
		d := make([]time.Duration, b.N)
		for i := range d {
			d[i] = samples[a][i] - samples[c][i]
		}
		m, _ := benchutil.Latency(d)
		return m
	}
	b.ReportMetric(diff(1, 0), "reply-added-median-µs")
	b.ReportMetric(diff(2, 1), "plugin-added-median-µs")
	b.ReportMetric(diff(2, 0), "added-median-µs")
}
