package plugin

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cpupool/nri-cpupool/internal/benchutil"
	"github.com/cpupool/nri-cpupool/internal/handlerclock"
)

// BenchmarkCreateContainerHandlerAllFeaturesClocks is the warm loop that
// issue 45's daemon figures are read against: the CreateContainer of the
// 384-CPU node with every feature on (allFeaturesNode, its host files, a
// 2-CPU exclusive container with a 1 GiB limit, as
// BenchmarkCreateContainerRoundTripAllFeaturesProcess creates), called
// back to back in this process, each container then stopped and removed
// with its pod. It reports each phase by wall and thread CPU clock
// (reportClocks), as -daemon.clocks does for the daemon, so that a phase
// that takes longer there can be told: longer on its CPU (the code ran
// slower, cold), or off it.
//
// Between two creations it does nothing (between=none: the warm loop),
// sleeps 500 µs, about a round trip's period in the daemon (sleep: the
// thread idles, other processes may run, and the creation may come back on
// the other CPU), sleeps as long with its thread held on one CPU
// (sleep-pinned: the core idles, and the creation comes back to its
// caches), waits as long on its CPU without sleeping or writing (spin:
// time passes, the core stays busy), makes one system call that
// touches next to no memory (syscall: on a kernel with page table
// isolation and no PCID, as this project's development VM, each kernel
// entry empties the TLB, so this tells the TLB's part), or writes over
// 32 MiB
// (evict: the CPU's data and unified caches and TLB hold other lines,
// as after other processes ran): what a creation costs when it finds
// the caches cold. evict256k, evict1m and evict4m write over less: the
// first level and part of the second, the second (a core's L2 on the
// development VM), and that and some of the shared third level; against
// evict, they tell from which level the cold creation's lines come back. Each runs with the clocks on and off (clocks=off: the
// handler's own time, create-mean-µs and create-median-µs, without the
// clocks' system calls in it).
func BenchmarkCreateContainerHandlerAllFeaturesClocks(b *testing.B) {
	evict := benchutil.NewEvictor()
	for _, between := range []struct {
		name string
		do   func()
	}{
		{"none", func() {}},
		{"sleep", func() { time.Sleep(500 * time.Microsecond) }},
		{"syscall", func() { syscall.Getppid() }},
		{"spin", func() { spinFor(500 * time.Microsecond) }},
		{"sleep-pinned", func() { time.Sleep(500 * time.Microsecond) }},
		{"evict256k", benchutil.NewEvictorOf(256 << 10).Evict},
		{"evict1m", benchutil.NewEvictorOf(1 << 20).Evict},
		{"evict4m", benchutil.NewEvictorOf(4 << 20).Evict},
		{"evict", evict.Evict},
	} {
		for _, on := range []bool{true, false} {
			b.Run(fmt.Sprintf("between=%s/clocks=%s", between.name, map[bool]string{true: "on", false: "off"}[on]), func(b *testing.B) {
				if strings.HasSuffix(between.name, "-pinned") {
					pinThisThread(b)
				}
				warmCreations(b, between.do, on)
			})
		}
	}
}

// warmCreations is BenchmarkCreateContainerHandlerAllFeaturesClocks with
// between run before each creation, and the creation clocks on or not.
func warmCreations(b *testing.B, between func(), withClocks bool) {
	shape := allFeaturesShape{largeNode, 384, 8}
	f := newFakeRuntime(b, true)
	allFeaturesHost(b, f, shape)
	var clocks *handlerclock.Recorder
	if withClocks {
		clocks = NewCreationClocks()
	}
	rp := startPluginWith(b, f, shape.allFeaturesNode(), statePath(f), func(rp *runningPlugin) { rp.p.TimeCreations(clocks) })
	ctx := context.Background()
	pods := make([]*api.PodSandbox, b.N)
	for i := range pods {
		pods[i] = f.runPod(podSpec{name: "warm" + strconv.Itoa(i), annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	}
	f.settle()
	var before handlerclock.Summary
	if withClocks {
		before = clocks.Summary(0)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i, pod := range pods {
		id := "ctr-warm" + strconv.Itoa(i)
		ctr := &api.Container{Id: id, PodSandboxId: pod.Id, Name: "c", State: api.ContainerState_CONTAINER_CREATED,
			Linux: &api.LinuxContainer{CgroupsPath: pod.Linux.CgroupParent + "/" + id,
				Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2048), Period: api.UInt64(100000)},
					Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)}}}}
		between()
		start := time.Now()
		_, _, err := rp.p.CreateContainer(ctx, pod, ctr)
		took = append(took, time.Since(start))
		require.NoError(b, err)
		_, err = rp.p.StopContainer(ctx, pod, ctr)
		require.NoError(b, err)
		require.NoError(b, rp.p.RemoveContainer(ctx, pod, ctr))
		require.NoError(b, rp.p.StopPodSandbox(ctx, pod))
		require.NoError(b, rp.p.RemovePodSandbox(ctx, pod))
	}
	b.StopTimer()
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(took)), "create-mean-µs")
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "create-median-µs")
	if withClocks {
		reportClocks(b, before, clocks.Summary(before.Seq))
	}
}

// reportClocks reports a creation clocks' summary (after) of the
// creations since before: each phase's wall and thread CPU median and
// mean (clk-<phase>-wall-median-µs, ...; <phase> total for the whole),
// the share of creations whose thread was preempted, switches and minor
// faults per creation, the creations timed and those left out (refused,
// or ended on another thread), and one mark's own cost.
func reportClocks(b *testing.B, before, after handlerclock.Summary) {
	for _, ph := range after.Phases {
		b.ReportMetric(ph.WallMedianUs, "clk-"+ph.Name+"-wall-median-µs")
		b.ReportMetric(ph.WallMeanUs, "clk-"+ph.Name+"-wall-mean-µs")
		b.ReportMetric(ph.CPUMedianUs, "clk-"+ph.Name+"-cpu-median-µs")
		b.ReportMetric(ph.CPUMeanUs, "clk-"+ph.Name+"-cpu-mean-µs")
	}
	b.ReportMetric(after.InvoluntaryShare, "clk-preempted-share")
	b.ReportMetric(after.InvoluntaryPerCall, "clk-invol-per-create")
	b.ReportMetric(after.VoluntaryPerCall, "clk-vol-per-create")
	b.ReportMetric(after.MinorFaultsPerCall, "clk-minflt-per-create")
	b.ReportMetric(after.MajorFaultsPerCall, "clk-majflt-per-create")
	b.ReportMetric(float64(after.Calls), "clk-creations")
	b.ReportMetric(float64(after.ThreadChanged-before.ThreadChanged+after.Incomplete-before.Incomplete+after.Lost), "clk-left-out")
	b.ReportMetric(float64(after.MarkWallNs), "clk-mark-wall-ns")
	b.ReportMetric(float64(after.MarkCPUNs), "clk-mark-cpu-ns")
}

// spinFor waits d on its CPU, reading the clock and writing nothing.
func spinFor(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// pinThisThread holds the calling goroutine on its thread and that thread
// on the CPU it runs on, for the rest of the goroutine: a benchmark's, so
// the thread ends with it (runtime.LockOSThread without the unlock) and no
// other goroutine inherits the affinity.
func pinThisThread(b *testing.B) {
	runtime.LockOSThread()
	var cpu uint32
	if _, _, errno := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); errno != 0 {
		b.Fatalf("getcpu: %v", errno)
	}
	var mask unix.CPUSet
	mask.Set(int(cpu))
	require.NoError(b, unix.SchedSetaffinity(0, &mask))
}
