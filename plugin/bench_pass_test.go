package plugin

import (
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/stretchr/testify/require"
)

// BenchmarkIsolationPassAfterCreation is the cost of the host files' pass
// a creation kicks, alone, with every isolation feature on (issue 45's
// fixtures: 512 IRQs, housekeeping, partitions, power classes) on the
// 384-CPU node with 0, 1,000 and 5,000 running: each round creates a 2-CPU
// exclusive container (and stops and removes the one created 8 rounds
// before) off the clock, then times the one pass that takes the change
// (the plugin's goroutine is held back). mode=kicked is the pass a kick
// makes (the files known to meet their want are not read); mode=full is
// the rescan's, which reads every wanted file, as every pass did before.
// The time per operation is the pass's wall time, much of it its
// journal's fsyncs on this machine's disk; cpu-µs-per-pass is the CPU
// (user and system) of the thread that made it. reads-per-pass is not counted here (hostfiles' tests
// count them); settled-per-pass is the files a kicked pass took as
// settled.
func BenchmarkIsolationPassAfterCreation(b *testing.B) {
	shape := allFeaturesShape{largeNode, 384, 8}
	for _, running := range []int{0, 1000, 5000} {
		for _, mode := range []string{"kicked", "full"} {
			b.Run("running="+strconv.Itoa(running)+"/mode="+mode, func(b *testing.B) {
				noop, ours := newFakeRuntime(b, true), newFakeRuntime(b, true)
				allFeaturesHost(b, ours, shape)
				// Only the passes timed here: the plugin's own goroutine
				// waits an hour after a kick (its rescan still comes).
				rp := startPlugin(b, ours, shape.allFeaturesNode(), statePath(ours), func(p *Plugin) {
					p.isolationTiming.Delay, p.isolationTiming.MinInterval = time.Hour, time.Hour
				})
				fillAllFeatures(b, noop, ours, shape.cpus, running)
				require.NoError(b, rp.p.FlushIsolation())
				recon := rp.p.isolation.Load().recon
				const keep = 8
				var pods []*podAndCtr
				var cpu time.Duration
				before := recon.Status()
				// The pass runs on this goroutine (Flush): its CPU is this
				// thread's.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					pod := ours.runPod(podSpec{name: "bench" + strconv.Itoa(i), annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
					ctr, _, err := ours.createContainer(pod, "c", 2000)
					require.NoError(b, err)
					pods = append(pods, &podAndCtr{pod: pod, ctr: ctr})
					if j := i - keep; j >= 0 {
						ours.stopContainer(pods[j].ctr)
						ours.removeContainer(pods[j].ctr)
						ours.removePod(pods[j].pod)
					}
					b.StartTimer()
					cpu0 := threadCPU(b)
					if mode == "kicked" {
						err = recon.FlushKicked()
					} else {
						err = recon.Flush()
					}
					cpu += threadCPU(b) - cpu0
					require.NoError(b, err)
				}
				b.StopTimer()
				after := recon.Status()
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs-per-pass")
				b.ReportMetric(float64(after.Writes+after.Restores-before.Writes-before.Restores)/float64(b.N), "host-writes-per-pass")
				b.ReportMetric(float64(after.Settled-before.Settled)/float64(max(after.Passes-before.Passes, 1)), "settled-per-pass")
			})
		}
	}
}

type podAndCtr struct {
	pod *api.PodSandbox
	ctr *api.Container
}

// threadCPU is the CPU time (user and system) the calling thread has
// used (RUSAGE_THREAD).
func threadCPU(b *testing.B) time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(rusageThread, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
