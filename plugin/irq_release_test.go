package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// irqLists is every IRQ's smp_affinity_list of spec and
// default_smp_affinity, as the fixture /proc holds them.
func irqLists(t *testing.T, f *fakeRuntime, spec procfixture.Spec) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, i := range spec.IRQs {
		data, err := os.ReadFile(filepath.Join(f.procRoot(), "irq", strconv.Itoa(i.N), "smp_affinity_list"))
		require.NoError(t, err)
		out[strconv.Itoa(i.N)] = strings.TrimSpace(string(data))
	}
	data, err := os.ReadFile(filepath.Join(f.procRoot(), "irq", "default_smp_affinity"))
	require.NoError(t, err)
	out["default"] = strings.TrimSpace(string(data))
	return out
}

// irqsExactlyOff tells whether every IRQ of spec (each on every CPU at
// first) may use every CPU but cpus, no more and no fewer; if not, the
// first that differs.
func irqsExactlyOff(f *fakeRuntime, spec procfixture.Spec, cpus cpuset.CPUSet) error {
	want := spec.CPUs.Difference(cpus)
	for _, i := range spec.IRQs {
		data, err := os.ReadFile(filepath.Join(f.procRoot(), "irq", strconv.Itoa(i.N), "smp_affinity_list"))
		if err != nil {
			return err
		}
		set, err := cpuset.Parse(strings.TrimSpace(string(data)))
		if err != nil {
			return err
		}
		if !set.Equals(want) {
			return fmt.Errorf("IRQ %d may use %s, not %s: kept off %s", i.N, set, want, spec.CPUs.Difference(set))
		}
	}
	return nil
}

// processCPU is the CPU time the test process has used (user and system).
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitPassesQuiet waits until no pass of the reconciler has run for
// longer than two passes may be spaced (BusyMax, after a long pass) and
// two MinIntervals: whatever was due has run.
func waitPassesQuiet(t *testing.T, recon *hostfiles.Reconciler, timing hostfiles.Timing) {
	t.Helper()
	passes, quiet, deadline := recon.Status().Passes, time.Now(), time.Now().Add(30*time.Second)
	for time.Since(quiet) < max(timing.BusyMax, timing.MinInterval)+2*timing.MinInterval {
		require.True(t, time.Now().Before(deadline), "passes still running")
		time.Sleep(timing.Delay)
		if n := recon.Status().Passes; n != passes {
			passes, quiet = n, time.Now()
		}
	}
}

// TestIRQBansFollowTheLiveContainers: at the production pass timing, one
// IRQ-isolated exclusive container runs throughout while others are
// created and removed with their pods, one at a time, then fifty in a
// burst. Once the passes are quiet, the IRQs are kept off exactly the
// CPUs of the containers running (no CPU of a removed one), and when the
// last one ends every affinity is what it was before. It also logs how
// long a new container's CPU could still take IRQs after its creation
// was answered (the background pass's lag).
func TestIRQBansFollowTheLiveContainers(t *testing.T) {
	f := newFakeRuntime(t, false)
	spec := manyIRQs(128, 4, 64)
	procfixture.Write(t, f.procRoot(), spec)
	node := testNode{fixture: "epyc-1s-nps4", config: `
isolatedCPUs: "4-63,68-127"
pools: {exclusive: {irqIsolation: optOut}}
irq: {rescanInterval: 1h}
`}
	rp := startPlugin(t, f, node, statePath(f))
	timing := rp.p.isolationTiming
	require.Equal(t, hostfiles.DefaultTiming, timing, "the production timing")
	recon := rp.p.isolation.Load().recon
	waitPassesQuiet(t, recon, timing)
	before := irqLists(t, f, spec)

	create := func(name string) (func(), cpuset.CPUSet) {
		pod := f.runPod(podSpec{name: name, annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
		ctr, _, err := f.createContainer(pod, "c", 1000)
		require.NoError(t, err)
		return func() {
			f.stopContainer(ctr)
			f.removeContainer(ctr)
			f.removePod(pod)
		}, cpusOf(t, f, f.cpus(ctr))
	}
	endStays, stays := create("stays")
	waitPassesQuiet(t, recon, timing)
	require.NoError(t, irqsExactlyOff(f, spec, stays))

	var lags []time.Duration
	for i := range 6 {
		remove, mine := create("one" + id(i))
		answered := time.Now()
		var last error
		require.Eventually(t, func() bool { last = irqsAvoid(f, spec, mine); return last == nil }, 5*time.Second, time.Millisecond, "IRQs off %s: %v", mine, last)
		lags = append(lags, time.Since(answered))
		require.NoError(t, irqsExactlyOff(f, spec, stays.Union(mine)))
		remove()
		waitPassesQuiet(t, recon, timing)
		assert.NoError(t, irqsExactlyOff(f, spec, stays), "container %d (%s) removed: its CPUs take IRQs again", i, mine)
		assert.True(t, stays.Equals(rp.p.isolation.Load().irq.LastBanned()), "banned %s", rp.p.isolation.Load().irq.LastBanned())
	}
	slices.Sort(lags)
	t.Logf("a new container's CPUs were free of IRQs %s to %s after its creation was answered (median %s)", lags[0], lags[len(lags)-1], lags[len(lags)/2])

	// A stream, as the benchmarks make: a creation every 10 ms, each
	// container removed once eight later ones run and its CPUs were seen
	// free of IRQs (read every 2 ms); how long each took is its window.
	type live struct {
		remove   func()
		cpus     cpuset.CPUSet
		answered time.Time
		free     bool
	}
	var running []*live
	lags = lags[:0]
	next := time.Now()
	passesBefore, cpuBefore, streamStart := recon.Status().Passes, processCPU(t), time.Now()
	for created := 0; created < 40 || len(running) > 0; time.Sleep(2 * time.Millisecond) {
		if created < 40 && time.Now().After(next) {
			remove, cpus := create("stream" + id(created))
			running = append(running, &live{remove: remove, cpus: cpus, answered: time.Now()})
			created++
			next = time.Now().Add(10 * time.Millisecond)
		}
		for _, c := range running {
			if !c.free && irqsAvoid(f, spec, c.cpus) == nil {
				c.free = true
				lags = append(lags, time.Since(c.answered))
			}
			require.True(t, c.free || time.Since(c.answered) < 10*time.Second, "a running container's CPUs %s still take IRQs after 10 s", c.cpus)
		}
		for len(running) > 0 && running[0].free && (len(running) > 8 || created == 40) {
			running[0].remove()
			running = running[1:]
		}
	}
	streamTook := time.Since(streamStart)
	passes, cpu := recon.Status().Passes-passesBefore, processCPU(t)-cpuBefore
	slices.Sort(lags)
	t.Logf("in a stream, a new container's CPUs were free of IRQs %s to %s after its creation was answered (median %s, p90 %s)", lags[0], lags[len(lags)-1], lags[len(lags)/2], lags[len(lags)*9/10])
	// The cost of the passes that bound it: how many ran, and the CPU of
	// the whole test process (the plugin, the fake runtime and this
	// loop's reads) per second of the stream.
	t.Logf("the stream took %s: %d passes (%.1f a second), process CPU %.2f s a second", streamTook.Round(time.Millisecond), passes, float64(passes)/streamTook.Seconds(), cpu.Seconds()/streamTook.Seconds())

	for i := range 50 {
		remove, _ := create("burst" + id(i))
		remove()
	}
	waitPassesQuiet(t, recon, timing)
	assert.NoError(t, irqsExactlyOff(f, spec, stays), "after the burst: only the CPU still held")
	assert.True(t, stays.Equals(rp.p.isolation.Load().irq.LastBanned()), "banned %s", rp.p.isolation.Load().irq.LastBanned())

	endStays()
	waitPassesQuiet(t, recon, timing)
	assert.Equal(t, before, irqLists(t, f, spec), "nothing held: every affinity exactly as before")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestReleasedCPUGetsIRQsBackAfterAReload: two IRQ-isolated exclusive
// containers run; a reload that changes only irq.rescanInterval makes the
// isolation sources again (restartIsolation: a new irq.Source); then one
// container's pod ends while the other stays. The released CPUs must get
// their IRQs back, as they do without the reload: the IRQs still hold the
// plugin's write for both containers. The new Source has no memory of
// its predecessor's writes, so they stay narrowed while the other
// container runs, in the same process (no restart, which the docs name).
func TestReleasedCPUGetsIRQsBackAfterAReload(t *testing.T) {
	for _, reload := range []bool{false, true} {
		t.Run(map[bool]string{false: "no reload", true: "reload"}[reload], func(t *testing.T) {
			f := irqNode(t)
			rp := startPlugin(t, f, isolatedDesktop, statePath(f))
			ann := map[string]string{"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev/pod": "true"}
			one := f.runPod(podSpec{name: "one", namespace: "telco", annotations: ann})
			c1, _, err := f.createContainer(one, "fwd", 2000)
			require.NoError(t, err)
			two := f.runPod(podSpec{name: "two", namespace: "telco", annotations: ann})
			c2, _, err := f.createContainer(two, "fwd", 2000)
			require.NoError(t, err)
			require.NoError(t, rp.p.FlushIsolation())
			stays := cpusOf(t, f, f.cpus(c2))
			requireIRQsOff(t, f, cpusOf(t, f, f.cpus(c1)).Union(stays))

			if reload {
				cfg := isolatedDesktop.config + "irq: {rescanInterval: 20s}\n"
				require.NoError(t, rp.p.Reload(reloadConfig(t, rp, cfg), nil, "test"))
				require.NoError(t, rp.p.FlushIsolation())
			}
			f.removePod(one)
			require.NoError(t, rp.p.FlushIsolation())
			all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
			assert.Equal(t, all.Difference(stays).String(), affinities(t, f)["24"], "IRQ 24 (0-15) off only the CPUs still held (%s)", stays)
		})
	}
}
