package plugin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/internal/benchutil"
)

// BenchmarkCreateContainerRoundTripHousekeeping is issue 32's budget: the
// reply's added latency with host processes kept off the exclusive CPUs
// (pools.exclusive.housekeeping: held) against the same plugin without,
// both on cgroup v2 with 200 running containers. Each creation kicks the
// background pass, which narrows the workqueue mask (384 CPUs) and three
// top-level cgroups while the next creations are measured; each measured
// container runs while the next 32 are created, so the passes also widen
// them again. The three runtimes (the no-op plugin, nri-cpupool without and
// with housekeeping) go in a new random order each round (measureRounds),
// so that the machine's noise, and each plugin's background work, falls on
// all alike. It reports what each plugin adds to the no-op
// plugin's creation (plain- and housekeeping-added-median-µs, medians of
// per-round differences), what housekeeping adds to that
// (housekeeping-extra-median-µs, the median of per-round differences of the
// two plugins' creations) and that as a fraction of plain-added
// (housekeeping-extra-fraction; the budget is 0.10), with the passes and writes
// the housekeeping plugin made while measured, which show that the work
// was there.
func BenchmarkCreateContainerRoundTripHousekeeping(b *testing.B) {
	noop, plain, kept := newFakeRuntime(b, true), newFakeRuntime(b, true), newFakeRuntime(b, true)
	startNoop(b, noop)
	startPlugin(b, plain, largeNode, statePath(plain))
	housekeepLargeNode(b, kept)
	node := testNode{fixture: largeNode.fixture, config: largeNode.config + "\npools: {exclusive: {housekeeping: held}}\n"}
	rp := startPlugin(b, kept, node, statePath(kept))
	for _, f := range []*fakeRuntime{noop, plain, kept} {
		fillNode(b, f, 200)
	}
	require.NoError(b, rp.p.FlushIsolation())
	before := rp.p.isolation.Load().recon.Status()
	require.Positive(b, before.Writes, "the running containers' CPUs are kept off the host before the clock starts")

	samples, _ := measureRounds(b, []*fakeRuntime{noop, plain, kept}, nil, 32)
	plainAdded, keptAdded, extra := make([]time.Duration, b.N), make([]time.Duration, b.N), make([]time.Duration, b.N)
	for i := 0; i < b.N; i++ {
		plainAdded[i] = samples[1][i] - samples[0][i]
		keptAdded[i] = samples[2][i] - samples[0][i]
		extra[i] = samples[2][i] - samples[1][i]
	}
	plainMedian, _ := benchutil.Latency(slices.Clone(plainAdded))
	keptMedian, _ := benchutil.Latency(slices.Clone(keptAdded))
	extraMedian, _ := benchutil.Latency(extra)
	b.ReportMetric(plainMedian, "plain-added-median-µs")
	b.ReportMetric(keptMedian, "housekeeping-added-median-µs")
	b.ReportMetric(extraMedian, "housekeeping-extra-median-µs")
	if plainMedian > 0 {
		b.ReportMetric(extraMedian/plainMedian, "housekeeping-extra-fraction")
	}
	after := rp.p.isolation.Load().recon.Status()
	b.ReportMetric(float64(after.Passes-before.Passes), "hk-passes")
	b.ReportMetric(float64(after.Writes+after.Restores-before.Writes-before.Restores), "hk-writes")
}

// housekeepLargeNode gives a fake runtime of largeNode what housekeeping
// narrows on a node not run by systemd: a cgroup v2 root that delegates
// cpuset to system, a service and the pods' tree, and the unbound
// workqueue mask of its 384 CPUs.
func housekeepLargeNode(b *testing.B, f *fakeRuntime) {
	b.Helper()
	write := func(path, content string) {
		require.NoError(b, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(b, os.WriteFile(path, []byte(content+"\n"), 0o644))
	}
	write(filepath.Join(f.cgroupRoot, "cgroup.subtree_control"), "cpuset cpu memory")
	write(filepath.Join(f.cgroupRoot, "system", "cpuset.cpus"), "")
	write(filepath.Join(f.cgroupRoot, "service", "cpuset.cpus"), "0-191")
	write(filepath.Join(f.cgroupRoot, "kubepods", "cpuset.cpus"), "")
	write(filepath.Join(f.sysfsRoot(largeNode.fixture), housekeeping.WorkqueueMask), strings.TrimSuffix(strings.Repeat("ffffffff,", 12), ","))
	write(filepath.Join(f.procRoot(), "sys/kernel/random/boot_id"), bootID)
	write(filepath.Join(f.procRoot(), "1/comm"), "init")
}
