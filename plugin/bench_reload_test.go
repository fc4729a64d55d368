package plugin

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/benchutil"
)

// reloadLayout is a config on largeNode (epyc-2s-384: CPU N's sibling is
// N+192, and 0/192 are infra's) with a shared pool of the cores of CPUs
// 188-191 and those of grow, taken from the exclusive pool.
func reloadLayout(grow cpuset.CPUSet) string {
	shared := cpuset.New(188, 189, 190, 191, 380, 381, 382, 383).Union(grow)
	exclusive := mustParse("1-191,193-383").Difference(shared)
	return fmt.Sprintf("isolatedCPUs: \"1-191,193-383\"\npools:\n  exclusive: {cpus: \"%s\"}\n  shared: {cpus: \"%s\"}\n", exclusive, shared)
}

// reloadSmallShared is the layout both plugins start with.
var reloadSmallShared = reloadLayout(cpuset.New())

// freeCoresAway returns n whole cores (both threads) that the exclusive
// pool has free, the last ones, and away from where a 2-CPU exclusive
// container is placed now (probed: created, then removed): the measured
// creations land there, and the reloads must be able to hand the cores to
// the shared pool and back without moving anyone.
func freeCoresAway(b testing.TB, f *fakeRuntime, rp *runningPlugin, n int) cpuset.CPUSet {
	pod := f.runPod(podSpec{name: "probe", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(b, err)
	probe := mustParse(f.cpus(ctr))
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	f.removePod(pod)
	rp.p.mu.Lock()
	free := rp.p.alloc.FreeCPUs("exclusive")
	rp.p.mu.Unlock()
	var cores []int
	for cpu := 191; cpu >= 1 && len(cores) < 2*n; cpu-- {
		core := cpuset.New(cpu, cpu+192)
		if core.IsSubsetOf(free) && core.Intersection(probe).IsEmpty() {
			cores = append(cores, cpu, cpu+192)
		}
	}
	require.Len(b, cores, 2*n, "free whole cores of the exclusive pool")
	return cpuset.New(cores...)
}

// BenchmarkCreateContainerRoundTripReloading measures what config reloads
// do to the CreateContainer round trip (issue 34: "the reply latency stays
// within budget"). Two plugins on the 384-CPU node, each behind its own
// runtime over the real NRI adaptation and ttRPC, run 200 containers (a
// quarter 1-CPU exclusive, a quarter shared members, the rest infra); one
// of them reloads its config back to back in another goroutine for the
// whole run, alternating two layouts whose shared pool differs, so that
// each reload is applied and pushes the 50 shared members' updates, which
// the runtime answers. Their creations of a 2-CPU exclusive container
// alternate (measureRounds), and the benchmark reports the median of the
// paired ratios, reloading over quiet (reload-ratio-median-x), each side's
// median and p99, how many reloads were applied during the run and the
// median time one took, its pushes answered (reload-median-ms).
func BenchmarkCreateContainerRoundTripReloading(b *testing.B) {
	quiet, reloading := newFakeRuntime(b, false), newFakeRuntime(b, false)
	node := testNode{fixture: largeNode.fixture, config: reloadSmallShared}
	startPlugin(b, quiet, node, statePath(quiet))
	rp := startPlugin(b, reloading, node, statePath(reloading))
	for _, f := range []*fakeRuntime{quiet, reloading} {
		fillMixed(b, f, 200)
	}
	grown := reloadLayout(freeCoresAway(b, reloading, rp, 4))
	configs := []*config.Config{benchReloadConfig(b, rp, grown), benchReloadConfig(b, rp, reloadSmallShared)}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var took []time.Duration
	var failed error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			if err := rp.p.Reload(configs[i%2], nil, "bench"); err != nil {
				failed = err
				return
			}
			took = append(took, time.Since(start))
		}
	}()
	samples, _ := measureRounds(b, []*fakeRuntime{quiet, reloading}, nil, 0)
	close(stop)
	wg.Wait()
	require.NoError(b, failed, "every reload is applied: no exclusive container is on the CPUs that change pools")
	require.NotEmpty(b, took, "reloads ran during the measure")

	ratios := make([]float64, b.N)
	for i := range ratios {
		ratios[i] = float64(samples[1][i]) / float64(samples[0][i])
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "reload-ratio-median-x")
	quietMedian, quietP99 := benchutil.Latency(samples[0])
	b.ReportMetric(quietMedian, "quiet-median-µs")
	b.ReportMetric(quietP99, "quiet-p99-µs")
	benchutil.ReportLatency(b, samples[1])
	b.ReportMetric(float64(len(took)), "reloads")
	reloadMedian, _ := benchutil.Latency(took)
	b.ReportMetric(reloadMedian/1000, "reload-median-ms")
}

// fillMixed runs n containers on f: a quarter 1-CPU exclusive, a quarter
// members of the shared pool, the rest infra members.
func fillMixed(b *testing.B, f *fakeRuntime, n int) {
	for i := 0; i < n; i++ {
		var ann map[string]string
		switch i % 4 {
		case 3:
			ann = map[string]string{"pool.cpupool.dev": "exclusive"}
		case 1:
			ann = map[string]string{"pool.cpupool.dev": "shared"}
		}
		pod := f.runPod(podSpec{name: "run" + id(i), annotations: ann})
		_, _, err := f.createContainer(pod, "c", 1000)
		require.NoError(b, err, "running container %d", i)
	}
}

// benchReloadConfig parses a config for a running plugin, its directories
// the plugin's, as the daemon's flags would make them (reloadConfig for a
// benchmark).
func benchReloadConfig(b *testing.B, rp *runningPlugin, yaml string) *config.Config {
	b.Helper()
	cfg, err := config.Parse(strings.NewReader(yaml), "reloaded config")
	require.NoError(b, err)
	rp.p.mu.Lock()
	defer rp.p.mu.Unlock()
	cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile = rp.p.cfg.SysfsRoot, rp.p.cfg.CgroupRoot, rp.p.cfg.ProcRoot, rp.p.cfg.StateFile
	return cfg
}

// TestReloadBenchLayouts: the benchmark's two layouts differ only in the
// shared pool's size, and a reload between them moves the shared members
// and nobody else, so that its reloads are applied, not refused.
func TestReloadBenchLayouts(t *testing.T) {
	if testing.Short() {
		t.Skip("renders the 384-CPU fixture")
	}
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, testNode{fixture: largeNode.fixture, config: reloadSmallShared}, statePath(f))
	pod := f.runPod(podSpec{name: "sh", annotations: map[string]string{"pool.cpupool.dev": "shared"}})
	sh, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "188-191,380-383", f.cpus(sh))
	ex := f.runPod(podSpec{name: "ex", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err = f.createContainer(ex, "c", 1000)
	require.NoError(t, err)
	grow := freeCoresAway(t, f, rp, 4)
	require.Equal(t, 8, grow.Size())
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, reloadLayout(grow)), nil, "test"), "nobody is on the cores it gives the shared pool")
	require.Equal(t, grow.Union(mustParse("188-191,380-383")).String(), f.cpus(sh), "the member's update is answered when Reload returns")
	require.Equal(t, 1, lastReload(t, rp).Updated)
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, reloadSmallShared), nil, "test"), "and back")
	require.Equal(t, "188-191,380-383", f.cpus(sh))
}
