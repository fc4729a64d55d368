package plugin

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	rtmetrics "runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/benchutil"
	"github.com/cpupool/nri-cpupool/internal/procfixture"
	"github.com/cpupool/nri-cpupool/state"
)

// largeNode: 384 CPUs, 8 NUMA nodes; one core kept for infra.
var largeNode = testNode{fixture: "epyc-2s-384", config: `isolatedCPUs: "1-191,193-383"`}

// bigNode: 1,024 CPUs, 4 NUMA nodes (issue 33); one core kept for infra.
// It holds 5,000 running containers with every eighth a 1-CPU exclusive
// one, which the 384-CPU node cannot.
var bigNode = testNode{fixture: "epyc-2s-1024", config: `isolatedCPUs: "1-511,513-1023"`}

// noopPlugin subscribes to the same events and decides nothing: the
// baseline for the cost the runtime pays for any NRI plugin.
type noopPlugin struct{}

func (noopPlugin) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, nil
}
func (noopPlugin) StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (noopPlugin) RemoveContainer(context.Context, *api.PodSandbox, *api.Container) error { return nil }

func startNoop(b *testing.B, f *fakeRuntime) {
	before := f.syncCount()
	s, err := stub.New(noopPlugin{}, stub.WithPluginName("noop"), stub.WithPluginIdx("10"), stub.WithSocketPath(f.socket))
	require.NoError(b, err)
	require.NoError(b, s.Start(context.Background()))
	b.Cleanup(s.Stop)
	f.waitSynced(before)
}

// BenchmarkCreateContainerRoundTrip measures CreateContainer through the
// runtime-side NRI library on the 384-CPU node with 0, 200 and 1,000
// running containers (a quarter of them 1-CPU exclusive, the rest infra),
// for nri-cpupool and for a no-op plugin, each behind its own runtime in
// this process. Their creations alternate, so that both see the same
// machine: on a shared VM the noise between two runs one after the other
// is larger than the difference measured. Each measured creation is a
// 2-CPU exclusive container, stopped and removed off the clock; the state
// writer runs in the background as it would on a node.
func BenchmarkCreateContainerRoundTrip(b *testing.B) {
	for _, running := range []int{0, 200, 1000} {
		b.Run(fmt.Sprintf("running=%d", running), func(b *testing.B) {
			noop, ours := newFakeRuntime(b, false), newFakeRuntime(b, false)
			startNoop(b, noop)
			startPlugin(b, ours, largeNode, statePath(ours))
			fillNode(b, noop, running)
			fillNode(b, ours, running)
			measurePaired(b, noop, ours)
		})
	}
}

// BenchmarkCreateContainerRoundTripAtScale is BenchmarkCreateContainerRoundTrip
// on the 1,024-CPU node with 0, 1,000 and 5,000 running containers, every
// eighth a 1-CPU exclusive one and the others infra (a quarter exclusive,
// 5,000 would take 1,250 CPUs): the budget is 0.15 ms added over the no-op
// plugin at each count.
func BenchmarkCreateContainerRoundTripAtScale(b *testing.B) {
	for _, running := range []int{0, 1000, 5000} {
		b.Run(fmt.Sprintf("running=%d", running), func(b *testing.B) {
			noop, ours := newFakeRuntime(b, false), newFakeRuntime(b, false)
			startNoop(b, noop)
			startPlugin(b, ours, bigNode, statePath(ours))
			fillNodeEvery(b, noop, running, 8)
			fillNodeEvery(b, ours, running, 8)
			measurePaired(b, noop, ours)
		})
	}
}

// BenchmarkCreateContainerRoundTripIRQIsolation is the round trip with 200
// running containers while every exclusive container's CPUs are kept free
// of IRQs (pools.exclusive.irqIsolation: optOut): each creation kicks the
// background pass, which rewrites the affinities of 512 IRQs of a fixture
// /proc while the next creations are measured.
func BenchmarkCreateContainerRoundTripIRQIsolation(b *testing.B) {
	noop, ours := newFakeRuntime(b, false), newFakeRuntime(b, false)
	procfixture.Write(b, ours.procRoot(), manyIRQs(384, 8, 512))
	startNoop(b, noop)
	node := testNode{fixture: largeNode.fixture, config: largeNode.config + "\npools: {exclusive: {irqIsolation: optOut}}\n"}
	rp := startPlugin(b, ours, node, statePath(ours))
	fillNode(b, noop, 200)
	fillNode(b, ours, 200)
	measurePaired(b, noop, ours)
	st := rp.p.isolation.Load().recon.Status()
	b.ReportMetric(float64(st.Passes), "irq-passes")
	b.ReportMetric(float64(st.Writes+st.Restores), "irq-writes")
}

// BenchmarkCreateContainerRoundTripIsolation is the round trip with 200
// running containers on cgroup v2 while every exclusive container's CPUs
// are kept free of IRQs and its cgroup is made an isolated partition
// (pools.exclusive.irqIsolation and isolatedPartition: optOut): each
// creation kicks the background pass, which rewrites the affinities of 512
// IRQs of a fixture /proc and writes the container's partition and its
// ancestors' exclusive CPUs, then undoes them when it is removed (each
// measured container runs while the next 32 are created, so that the
// passes, at most every 100 ms, find it), while the next creations are
// measured. The containers' cgroups exist with the
// cpuset files of a 6.7+ kernel before they are created (made off the
// clock, as runc would make them right after the reply), so the pass
// writes the partitions at once rather than waiting for them.
func BenchmarkCreateContainerRoundTripIsolation(b *testing.B) {
	noop, ours := newFakeRuntime(b, true), newFakeRuntime(b, true)
	procfixture.Write(b, ours.procRoot(), manyIRQs(384, 8, 512))
	startNoop(b, noop)
	node := testNode{fixture: largeNode.fixture, config: largeNode.config + "\npools: {exclusive: {irqIsolation: optOut, isolatedPartition: optOut}}\n"}
	counted := &cgroupWrites{root: ours.cgroupRoot}
	rp := startPlugin(b, ours, node, statePath(ours), func(p *Plugin) { p.isolationFS = counted })
	fillNode(b, noop, 200)
	for i := 0; i < 200; i++ {
		pod := ours.runPod(podSpec{name: "run" + id(i), annotations: exclusiveEvery(i)})
		runcWillCreate(b, ours, pod, "c")
		_, _, err := ours.createContainer(pod, "c", 1000)
		require.NoError(b, err)
	}
	for i := 0; i < b.N; i++ {
		// measurePaired's pods and containers, by name.
		partitionable(b, ours, "/kubepods/poduid-bench"+strconv.Itoa(i)+"/ctr-bench"+strconv.Itoa(i)+"-c")
	}
	require.NoError(b, rp.p.FlushIsolation())
	require.Positive(b, counted.n.Load(), "the running containers' partitions are written")
	before := counted.n.Load()
	measurePairedKeeping(b, noop, ours, 32)
	st := rp.p.isolation.Load().recon.Status()
	during := counted.n.Load() - before
	b.ReportMetric(float64(st.Passes), "iso-passes")
	b.ReportMetric(float64(st.Writes+st.Restores), "iso-writes")
	b.ReportMetric(float64(during), "partition-writes")
	if during == 0 {
		// No pass came during a short run: the last containers, still
		// running, get their partitions now.
		require.NoError(b, rp.p.FlushIsolation())
		require.Positive(b, counted.n.Load()-before, "the measured containers' cgroups are partitioned")
	}
}

// cgroupWrites is the real file system, counting the writes below root
// that succeed.
type cgroupWrites struct {
	hostfiles.OS
	root string
	n    atomic.Int64
}

func (c *cgroupWrites) WriteFile(path string, data []byte) error {
	err := c.OS.WriteFile(path, data)
	if err == nil && strings.HasPrefix(path, c.root+"/") {
		c.n.Add(1)
	}
	return err
}

// BenchmarkCreateContainerRoundTripPowerClasses is the round trip with 200
// running containers while every CPU has a power class (exclusive
// containers theirs, idle exclusive CPUs and infra another): each creation
// kicks the background pass, which plans the classes of 384 CPUs and
// writes their PM QoS files (the fixture, like a VM, has no cpufreq: the
// governor is reported unsupported) while the next creations are measured.
func BenchmarkCreateContainerRoundTripPowerClasses(b *testing.B) {
	noop, ours := newFakeRuntime(b, false), newFakeRuntime(b, false)
	startNoop(b, noop)
	node := testNode{fixture: largeNode.fixture, config: largeNode.config + `
power:
  classes:
    low-latency: {resumeLatencyUS: n/a, governor: performance}
    saver: {resumeLatencyUS: 100}
  pools:
    exclusive: {class: low-latency, idleClass: saver}
    infra: {class: saver}
`}
	rp := startPlugin(b, ours, node, statePath(ours))
	fillNode(b, noop, 200)
	fillNode(b, ours, 200)
	measurePaired(b, noop, ours)
	st := rp.p.isolation.Load().recon.Status()
	b.ReportMetric(float64(st.Passes), "power-passes")
	b.ReportMetric(float64(st.Writes+st.Restores), "power-writes")
}

// BenchmarkCreateContainerRoundTripBusyDisk is the round trip with 200
// running containers while another process writes and fsyncs a file in
// the state file's directory, without pause: what a node pulling images
// or writing logs does to the disk.
func BenchmarkCreateContainerRoundTripBusyDisk(b *testing.B) {
	noop, ours := newFakeRuntime(b, false), newFakeRuntime(b, false)
	startNoop(b, noop)
	startPlugin(b, ours, largeNode, statePath(ours))
	fillNode(b, noop, 200)
	fillNode(b, ours, 200)
	syncs := startDiskHog(b, filepath.Dir(statePath(ours)))
	measurePaired(b, noop, ours)
	b.ReportMetric(float64(syncs()), "hog-fsyncs")
}

// fillNode runs n containers, a quarter of them 1-CPU exclusive.
func fillNode(b *testing.B, f *fakeRuntime, n int) { fillNodeEvery(b, f, n, 4) }

// fillNodeEvery runs n containers, every nth a 1-CPU exclusive one (none
// when every is 0), the others infra members.
func fillNodeEvery(b *testing.B, f *fakeRuntime, n, every int) {
	for i := 0; i < n; i++ {
		var ann map[string]string
		if every > 0 && i%every == every-1 {
			ann = map[string]string{"pool.cpupool.dev": "exclusive"}
		}
		pod := f.runPod(podSpec{name: "run" + id(i), annotations: ann})
		_, _, err := f.createContainer(pod, "c", 1000)
		require.NoError(b, err, "running container %d", i)
	}
}

// measurePaired times b.N creations of a 2-CPU exclusive container behind
// each runtime, alternating which goes first, and reports nri-cpupool's
// median and p99 (median-µs, p99-µs), the no-op plugin's (noop-median-µs,
// noop-p99-µs), the median of the differences within each pair
// (added-median-µs: what nri-cpupool adds to a creation, each difference
// taken under the same machine conditions) and the objects nri-cpupool's
// process side allocated per round trip, its background work included
// (allocs-per-rt).
func measurePaired(b *testing.B, noop, ours *fakeRuntime) { measurePairedKeeping(b, noop, ours, 0) }

// measurePairedKeeping is measurePaired where each measured container
// keeps running while the next keep are created (then it is stopped and
// removed with its pod, off the clock), so that background work on it
// (its isolated partition) happens while later creations are measured.
//
// It also reports added-p99-µs, nri-cpupool's p99 less the no-op's (what
// it adds to the slow end), and added-paired-p99-µs, the p99 of the
// per-round differences; it returns the samples, by runtime (the no-op's
// first) and round.
func measurePairedKeeping(b *testing.B, noop, ours *fakeRuntime, keep int) [][]time.Duration {
	samples, allocs := measureRounds(b, []*fakeRuntime{noop, ours}, ours, keep)
	added := make([]time.Duration, b.N)
	for i := range added {
		added[i] = samples[1][i] - samples[0][i]
	}
	addedMedian, addedP99 := benchutil.Latency(added)
	b.ReportMetric(addedMedian, "added-median-µs")
	b.ReportMetric(addedP99, "added-paired-p99-µs")
	benchutil.ReportLatency(b, slices.Clone(samples[1]))
	_, oursP99 := benchutil.Latency(slices.Clone(samples[1]))
	noopMedian, noopP99 := benchutil.Latency(slices.Clone(samples[0]))
	b.ReportMetric(noopMedian, "noop-median-µs")
	b.ReportMetric(noopP99, "noop-p99-µs")
	b.ReportMetric(oursP99-noopP99, "added-p99-µs")
	b.ReportMetric(allocs, "allocs-per-rt")
	return samples
}

// measureRounds times b.N rounds of creations of a 2-CPU exclusive
// container, one behind each runtime per round, and returns the times by
// runtime and round, and the
// objects allocated per creation behind counted (its background work
// included; nil counts none). Each measured container runs while the
// next keep are created; then it is stopped and removed with its pod, off
// the clock.
//
// The order within a round is what makes the comparison fair: a creation
// behind nri-cpupool leaves background work (the state writer, host file
// passes) that runs during the next creation, whichever runtime that is.
// Two runtimes alternate which goes first. With more, a fixed rotation
// would always put the same runtime after the same one (the third behind
// the second's background work, the first behind the last's), a bias as
// large as the few microseconds being compared; so each round takes its
// own order, a permutation from a seeded generator, and every runtime
// follows every other alike.
func measureRounds(b *testing.B, rts []*fakeRuntime, counted *fakeRuntime, keep int) ([][]time.Duration, float64) {
	pods := make([][]*api.PodSandbox, len(rts))
	ctrs := make([][]*api.Container, len(rts))
	for k, f := range rts {
		for i := 0; i < b.N; i++ {
			pods[k] = append(pods[k], f.runPod(podSpec{name: "bench" + strconv.Itoa(i), annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}))
		}
		if f.settle != nil {
			f.settle() // the sandboxes just run are pinned before the clock starts
		}
	}
	samples := make([][]time.Duration, len(rts))
	var allocs uint64
	counter := []rtmetrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	order := roundOrders(b.N, len(rts))
	stopProfiles := profileRounds(b)
	defer stopProfiles()
	var roundsDone atomic.Int64 // for profiles that cover part of the rounds
	for _, f := range rts {
		if f.profileRounds != nil {
			defer f.profileRounds(roundsDone.Load)()
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, k := range order[i] {
			f := rts[k]
			rtmetrics.Read(counter)
			before := counter[0].Value.Uint64()
			start := time.Now()
			ctr, _, err := f.createContainer(pods[k][i], "c", 2000)
			samples[k] = append(samples[k], time.Since(start))
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if f == counted {
				rtmetrics.Read(counter)
				allocs += counter[0].Value.Uint64() - before
			}
			ctrs[k] = append(ctrs[k], ctr)
			if i2 := i - keep; i2 >= 0 {
				f.stopContainer(ctrs[k][i2])
				f.removeContainer(ctrs[k][i2])
				f.removePod(pods[k][i2])
			}
			b.StartTimer()
		}
		roundsDone.Add(1)
	}
	b.StopTimer()
	return samples, float64(allocs) / float64(b.N)
}

// roundOrders is the order of the runtimes in each of rounds rounds
// (measureRounds): two alternate, more are permuted at random, from a
// fixed seed so that a run can be repeated.
func roundOrders(rounds, runtimes int) [][]int {
	rng := rand.New(rand.NewPCG(31, 32))
	orders := make([][]int, rounds)
	for i := range orders {
		order := make([]int, runtimes)
		for j := range order {
			order[j] = (i + j) % runtimes
		}
		if runtimes > 2 {
			rng.Shuffle(runtimes, func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		orders[i] = order
	}
	return orders
}

// exclusiveEvery makes every fourth container a 1-CPU exclusive one and
// the others infra members.
func exclusiveEvery(i int) map[string]string {
	if i%4 != 3 {
		return nil // infra
	}
	return map[string]string{"pool.cpupool.dev": "exclusive"}
}

// diskHogEnv names the directory the disk hog writes in; the test binary
// re-executed with it set runs TestDiskHog and nothing else.
const diskHogEnv = "NRI_CPUPOOL_DISK_HOG"

// startDiskHog starts another process that writes 256 KiB and fdatasyncs
// it, in a loop, in dir. It returns a function that counts its fsyncs.
func startDiskHog(b *testing.B, dir string) func() int {
	require.NoError(b, os.MkdirAll(dir, 0o700))
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskHog$")
	cmd.Env = append(os.Environ(), diskHogEnv+"="+dir)
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	count := filepath.Join(dir, "hog.count")
	require.Eventually(b, func() bool { _, err := os.Stat(count); return err == nil }, 10*time.Second, time.Millisecond, "disk hog started")
	return func() int {
		raw, _ := os.ReadFile(count)
		n, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
		return n
	}
}

// TestDiskHog is the disk hog's body: it runs only when re-executed by
// startDiskHog, until killed.
func TestDiskHog(t *testing.T) {
	dir := os.Getenv(diskHogEnv)
	if dir == "" {
		t.Skip("runs as the benchmarks' disk hog only")
	}
	data := make([]byte, 256<<10)
	path := filepath.Join(dir, "hog.data")
	for n := 1; ; n++ {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		require.NoError(t, err)
		_, err = f.Write(data)
		require.NoError(t, err)
		require.NoError(t, unix.Fdatasync(int(f.Fd())))
		require.NoError(t, f.Close())
		if n%10 == 1 {
			// Replaced by a rename, so that a reader never sees it empty.
			tmp := filepath.Join(dir, "hog.count.tmp")
			require.NoError(t, os.WriteFile(tmp, []byte(strconv.Itoa(n)), 0o600))
			require.NoError(t, os.Rename(tmp, filepath.Join(dir, "hog.count")))
		}
	}
}

// BenchmarkStateBurst1000 creates 1,000 containers in a row through the
// runtime-side NRI library (a quarter 1-CPU exclusive) and reports how many
// state writes they caused and how long after the last reply the file
// matched memory. It measures once whatever b.N is: run it with
// -benchtime=1x.
func BenchmarkStateBurst1000(b *testing.B) {
	f := newFakeRuntime(b, false)
	rp := startPlugin(b, f, largeNode, statePath(f))
	w := rp.p.writer
	require.NoError(b, rp.p.Flush())
	pods := make([]*api.PodSandbox, 1000)
	for i := range pods {
		pods[i] = f.runPod(podSpec{name: "burst" + id(i), annotations: exclusiveEvery(i)})
	}
	writesBefore := w.writes.Load()
	b.ResetTimer()
	start := time.Now()
	for i, pod := range pods {
		_, _, err := f.createContainer(pod, "c", 1000)
		require.NoError(b, err, "creation %d", i)
	}
	last := time.Now()
	rp.p.mu.Lock()
	gen := rp.p.gen
	rp.p.mu.Unlock()
	for w.onDisk.Load() < gen {
		time.Sleep(100 * time.Microsecond)
	}
	settled := time.Since(last)
	b.StopTimer()
	writes := w.writes.Load() - writesBefore

	st, err := state.ReadState(statePath(f))
	require.NoError(b, err)
	rp.p.mu.Lock()
	memory := maps.Clone(rp.p.memory.Containers)
	rp.p.mu.Unlock()
	require.Equal(b, memory, st.Containers, "the file matches memory")
	require.Len(b, st.Containers, 1000)
	b.ReportMetric(float64(writes), "state-writes")
	b.ReportMetric(float64(settled.Microseconds())/1e3, "settle-ms")
	b.ReportMetric(float64(last.Sub(start).Microseconds())/1e3, "burst-ms")
}

// BenchmarkSynchronize1000 measures reconciling 1,000 containers (380
// remembered exclusive ones, the others infra) after a restart on the
// 384-CPU node; the state is written in the background, as after a real
// Synchronize.
func BenchmarkSynchronize1000(b *testing.B) {
	benchSynchronize(b, largeNode, 1000, 1, exclusiveCPUs(383, 192))
}

// BenchmarkSynchronize5000 is the same with 5,000 containers on the
// 1,024-CPU node (issue 33): every fifth a remembered exclusive one, on
// 1,000 distinct CPUs, the others infra.
func BenchmarkSynchronize5000(b *testing.B) {
	benchSynchronize(b, bigNode, 5000, 5, exclusiveCPUs(1023, 512)[:1000])
}

// exclusiveCPUs are CPUs 2 to last-1 without skip: one for each
// remembered exclusive container (CPU 0's core is infra's).
func exclusiveCPUs(last, skip int) []int {
	var cpus []int
	for c := 2; c < last; c++ {
		if c != skip {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// benchSynchronize reconciles n containers of which every every-th, while
// cpus last, is a remembered exclusive container on a CPU of its own.
func benchSynchronize(b *testing.B, node testNode, n, every int, cpus []int) {
	cfg, topo := benchNode(b, node)
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	store := state.NewFileStore(filepath.Join(b.TempDir(), "state.json"))

	st := state.NewState()
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for i := 0; i < n; i++ {
		pod := &api.PodSandbox{Id: "sb" + id(i), Name: "p" + id(i), Uid: "u" + id(i), Namespace: "ns",
			Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/podu" + id(i), CgroupsPath: "/kubepods/podu" + id(i) + "/sb" + id(i)}}
		ctr := &api.Container{Id: "c" + id(i), PodSandboxId: pod.Id, Name: "c", State: api.ContainerState_CONTAINER_RUNNING,
			Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2)}}}}
		if i%every == 0 && len(cpus) > 0 {
			cs := strconv.Itoa(cpus[0])
			cpus = cpus[1:]
			st.Containers[ctr.Id] = state.ContainerState{PodUID: pod.Uid, PodNamespace: "ns", PodName: pod.Name, Container: "c", Pool: "exclusive", MilliCPU: 1000, CPUs: cs}
			ctr.Linux.Resources.Cpu.Cpus = cs
			ctr.Linux.Resources.Cpu.Shares = api.UInt64(1024)
			pod.Annotations = map[string]string{"pool.cpupool.dev": "exclusive"}
		}
		pods, ctrs = append(pods, pod), append(ctrs, ctr)
	}
	require.NoError(b, store.Save(st))
	p, err := New(cfg, topo, store, log)
	require.NoError(b, err)
	b.Cleanup(p.Close)
	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := p.Synchronize(context.Background(), pods, ctrs); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	benchutil.ReportLatency(b, samples)
}

// BenchmarkPluginRSS builds the real binaries, runs the daemon against the
// runtime side and reports its peak RSS: with 500 containers on the
// 384-CPU node (every second a 1-CPU exclusive one), 1,000 there (every
// fourth), and 5,000 on the 1,024-CPU node (every eighth). It measures
// once whatever b.N is: run it with -benchtime=1x.
//
// containers=N runs without DRA: nri-cpupool, which links no Kubernetes
// client (issue 33). dra/containers=N runs the same with dra.enabled:
// nri-cpupool execs nri-cpupool-dra, whose driver serves the kubelet's
// sockets and tries to publish its slices to an API server that does not
// answer (this measures the libraries and the driver, not a cluster's
// answers), with the same containers in the default pools (with the
// driver on, exclusive CPUs are given only through claims). Besides the peak, each reports the peak once synchronized
// with no container (idle-peak-RSS-MiB) and, at the end, the RSS's parts
// from /proc/PID/smaps_rollup: anonymous memory, file-backed (the
// binary's text and data, mostly), and how much of that the kernel maps
// with huge pages (FilePmdMapped).
func BenchmarkPluginRSS(b *testing.B) {
	for _, dra := range []bool{false, true} {
		for _, tc := range []struct {
			containers, every int
			node              testNode
		}{
			{500, 2, largeNode},
			{1000, 4, largeNode},
			{5000, 8, bigNode},
		} {
			name := fmt.Sprintf("containers=%d", tc.containers)
			if dra {
				name = "dra/" + name
			}
			b.Run(name, func(b *testing.B) {
				var bin string
				if dra {
					bin = buildBinaries(b)
				} else {
					bin = buildBinary(b)
				}
				f := newFakeRuntime(b, false)
				spec := daemonSpec{bin: bin, node: tc.node, logLevel: "warn"}
				if dra {
					spec.config = draBenchConfig(b, b.TempDir())
				}
				d := startDaemon(b, f, spec)
				if dra {
					waitDRAState(b, d.stateFile, "serving")
				}
				pid := d.cmd.Process.Pid
				idle, err := peakRSS(pid)
				require.NoError(b, err)
				every := tc.every
				if dra {
					// The driver gives exclusive CPUs only through claims,
					// which need an API server: the same containers, in the
					// default pools.
					every = 0
				}
				fillNodeEvery(b, f, tc.containers, every)
				hwm, err := peakRSS(pid)
				require.NoError(b, err)
				parts, err := rssParts(pid)
				require.NoError(b, err)
				b.ReportMetric(float64(hwm)/1024, "peak-RSS-MiB")
				b.ReportMetric(float64(idle)/1024, "idle-peak-RSS-MiB")
				b.ReportMetric(float64(parts["Anonymous"])/1024, "anon-MiB")
				b.ReportMetric(float64(parts["Rss"]-parts["Anonymous"])/1024, "file-MiB")
				b.ReportMetric(float64(parts["FilePmdMapped"])/1024, "file-pmd-MiB")
			})
		}
	}
}

// draBenchConfig turns the DRA driver on for a daemon of the benchmarks:
// its kubeconfig names an API server that does not answer, and the
// kubelet's registration directory exists, so the driver serves.
func draBenchConfig(tb testing.TB, dir string) string {
	tb.Helper()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(tb, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: "t"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	kubelet := filepath.Join(dir, "kubelet")
	registry := filepath.Join(kubelet, "plugins_registry")
	require.NoError(tb, os.MkdirAll(registry, 0o750))
	return fmt.Sprintf(`dra:
  enabled: true
  nodeName: node-a
  kubeconfig: %s
  cdiDir: %s
  pluginDir: %s
  registryDir: %s
`, kubeconfig, filepath.Join(dir, "cdi"), filepath.Join(kubelet, "plugins", "cpupool.dev"), registry)
}

// waitDRAState waits until the driver's status file (next to the state
// file) shows state.
func waitDRAState(tb testing.TB, stateFile, state string) {
	tb.Helper()
	path := dracore.StatusFile(stateFile)
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		if strings.Contains(string(data), `"state":"`+state+`"`) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the DRA driver did not reach %s: %s", state, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rssParts reads /proc/PID/smaps_rollup, in KiB by field.
func rssParts(pid int) (map[string]int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
