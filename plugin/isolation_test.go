package plugin

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/procfixture"
	"github.com/cpupool/nri-cpupool/irq"
)

// isolatedDesktop is desktop with IRQ isolation offered to exclusive
// containers that ask, and given to exclusive-non-isolcpus ones unless
// they decline.
var isolatedDesktop = testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15", irqIsolation: optIn}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true, irqIsolation: optOut}
allowedNamespaces:
  exclusive: [telco]
`}

const bootID = "0d8a3c52-6f5e-4b1c-9e2a-4a1f3c5d7e90"

// desktopIRQs is the desktop's /proc: 16 CPUs, a NIC queue IRQ on every
// CPU, one pinned to CPU 5, one to infra, one on the exclusive CPUs only.
func desktopIRQs() procfixture.Spec {
	all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	return procfixture.Spec{CPUs: all, BootID: bootID, IRQs: []procfixture.IRQ{
		{N: 0, Affinity: all, Node: -1, Description: "IO-APIC 2-edge timer"},
		{N: 24, Affinity: all, Node: 0, Description: "PCI-MSI 524288-edge eth0-rx-0"},
		{N: 25, Affinity: cpuset.New(5), Node: 0, Description: "PCI-MSI 524289-edge eth0-rx-1"},
		{N: 26, Affinity: cpuset.New(0, 1), Node: 0, Description: "PCI-MSI 524290-edge ahci"},
		{N: 27, Affinity: cpuset.New(4, 5, 6, 7, 12, 13, 14, 15), Node: 0, Description: "PCI-MSI 65536-edge nvme0q1"},
	}}
}

// irqNode is a fake runtime whose /proc has IRQs.
func irqNode(t *testing.T) *fakeRuntime {
	t.Helper()
	f := newFakeRuntime(t, false)
	procfixture.Write(t, f.procRoot(), desktopIRQs())
	return f
}

func affinities(t *testing.T, f *fakeRuntime) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, irq := range []string{"0", "24", "25", "26", "27"} {
		data, err := os.ReadFile(filepath.Join(f.procRoot(), "irq", irq, "smp_affinity_list"))
		require.NoError(t, err)
		out[irq] = strings.TrimSpace(string(data))
	}
	data, err := os.ReadFile(filepath.Join(f.procRoot(), "irq", "default_smp_affinity"))
	require.NoError(t, err)
	out["default"] = strings.TrimSpace(string(data))
	return out
}

var originalAffinities = map[string]string{"0": "0-15", "24": "0-15", "25": "5", "26": "0-1", "27": "4-7,12-15", "default": "ffff"}

// requireIRQsOff checks that no IRQ and not the default affinity may use
// cpus.
func requireIRQsOff(t *testing.T, f *fakeRuntime, cpus cpuset.CPUSet) {
	t.Helper()
	for irq, list := range affinities(t, f) {
		var set cpuset.CPUSet
		var err error
		if irq == "default" {
			set = maskSet(t, list)
		} else {
			set, err = cpuset.Parse(list)
			require.NoError(t, err)
		}
		assert.True(t, set.Intersection(cpus).IsEmpty(), "IRQ %s (%s) avoids %s", irq, list, cpus)
		assert.False(t, set.IsEmpty(), "IRQ %s has CPUs", irq)
	}
}

func maskSet(t *testing.T, mask string) cpuset.CPUSet {
	t.Helper()
	var ids []int
	var v uint64
	_, err := fmt.Sscanf(mask, "%x", &v)
	require.NoError(t, err)
	for i := 0; i < 64; i++ {
		if v&(1<<i) != 0 {
			ids = append(ids, i)
		}
	}
	return cpuset.New(ids...)
}

func cpusOf(t *testing.T, f *fakeRuntime, ctrCPUs string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(ctrCPUs)
	require.NoError(t, err)
	return set
}

// TestIRQsMoveOffAndComeBack: a container of a pool that offers IRQ
// isolation and asks for it gets its CPUs free of device IRQs, also while
// it is stopped and its CPUs are held for its pod; another exclusive
// container that does not ask does not; when the pod ends every IRQ gets
// exactly its original affinity back, over the real NRI protocol.
func TestIRQsMoveOffAndComeBack(t *testing.T) {
	f := irqNode(t)
	rp := startPlugin(t, f, isolatedDesktop, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, originalAffinities, affinities(t, f), "nothing held: nothing moved")

	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev/pod": "true"}})
	fwd, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)
	plain := f.runPod(podSpec{name: "plain", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	other, _, err := f.createContainer(plain, "app", 1000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())

	mine := cpusOf(t, f, f.cpus(fwd))
	require.Equal(t, 2, mine.Size())
	requireIRQsOff(t, f, mine)
	theirs := cpusOf(t, f, f.cpus(other))
	aff := affinities(t, f)
	set, _ := cpuset.Parse(aff["24"])
	assert.True(t, theirs.IsSubsetOf(set), "the container that did not ask keeps IRQs (%s on %s)", aff["24"], theirs)
	st := rp.p.isolation.Load().recon.Status()
	assert.Positive(t, st.Records["irq"])

	f.stopContainer(fwd)
	require.NoError(t, rp.p.FlushIsolation())
	requireIRQsOff(t, f, mine)

	f.removePod(telco)
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, originalAffinities, affinities(t, f), "the pod ended: everything as it was")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestIRQIsolationAnnotationRefused: asking for IRQ isolation in a pool
// that does not offer it is an error the tenant sees, and nothing is
// placed.
func TestIRQIsolationAnnotationRefused(t *testing.T) {
	f := irqNode(t)
	startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "p", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev": "true"}})
	_, _, err := f.createContainer(pod, "c", 1000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool exclusive does not offer IRQ isolation (pools.exclusive.irqIsolation is off)")
}

// TestIRQsRestoredAfterKill: the plugin is killed while IRQs are off an
// isolated container's CPUs. The pod ends while it is away; the next
// plugin restores every IRQ exactly from the journal. A container still
// running keeps its CPUs free of IRQs, computed from the originals.
func TestIRQsRestoredAfterKill(t *testing.T) {
	for _, podEnds := range []bool{true, false} {
		t.Run(fmt.Sprintf("pod ends while away: %v", podEnds), func(t *testing.T) {
			f := irqNode(t)
			first := startPlugin(t, f, isolatedDesktop, statePath(f))
			pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
			ctr, _, err := f.createContainer(pod, "c", 1000)
			require.NoError(t, err)
			require.NoError(t, first.p.FlushIsolation())
			mine := cpusOf(t, f, f.cpus(ctr))
			requireIRQsOff(t, f, mine)
			first.kill()
			if podEnds {
				f.removeContainer(ctr)
				f.removePod(pod)
			}

			second := startPlugin(t, f, isolatedDesktop, statePath(f))
			require.NoError(t, second.p.FlushIsolation())
			if podEnds {
				assert.Equal(t, originalAffinities, affinities(t, f))
				return
			}
			requireIRQsOff(t, f, mine)
			aff := affinities(t, f)
			assert.Equal(t, cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15).Difference(mine).String(), aff["24"], "from the original, all CPUs")
			f.removeContainer(ctr)
			f.removePod(pod)
			require.NoError(t, second.p.FlushIsolation())
			assert.Equal(t, originalAffinities, affinities(t, f))
		})
	}
}

// TestSharedPoolAlwaysFreeOfIRQs: a pool configured so keeps its CPUs free
// of IRQs with no container at all, from the first Synchronize.
func TestSharedPoolAlwaysFreeOfIRQs(t *testing.T) {
	f := irqNode(t)
	node := testNode{fixture: desktop.fixture, config: strings.Replace(desktop.config, `shared: {cpus: "2-3,10-11"}`, `shared: {cpus: "2-3,10-11", irqIsolation: always}`, 1)}
	rp := startPlugin(t, f, node, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	requireIRQsOff(t, f, cpuset.New(2, 3, 10, 11))
	assert.Equal(t, "0-1,4-9,12-15", affinities(t, f)["24"])
}

// TestExclusivePoolAlwaysFreeOfIRQs: an exclusive pool configured so
// keeps all its CPUs free of IRQs with no container holding them, from the
// first Synchronize, while containers come and go, and an IRQ pinned to
// them moves to the free CPUs of its node; a container cannot decline it.
// A plugin started without the setting puts every IRQ back.
func TestExclusivePoolAlwaysFreeOfIRQs(t *testing.T) {
	f := irqNode(t)
	node := testNode{fixture: desktop.fixture, config: strings.Replace(desktop.config, `exclusive: {cpus: "4-7,12-15"}`, `exclusive: {cpus: "4-7,12-15", irqIsolation: always}`, 1)}
	require.NotEqual(t, desktop.config, node.config)
	pool := cpuset.New(4, 5, 6, 7, 12, 13, 14, 15)
	free := map[string]string{"0": "0-3,8-11", "24": "0-3,8-11", "25": "0-3,8-11", "26": "0-1", "27": "0-3,8-11", "default": "0f0f"}
	rp := startPlugin(t, f, node, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	requireIRQsOff(t, f, pool)
	assert.Equal(t, free, affinities(t, f), "nothing held: the pool's CPUs are kept free all the same")

	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.True(t, cpusOf(t, f, f.cpus(ctr)).IsSubsetOf(pool))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, free, affinities(t, f))
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	f.removePod(pod)
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, free, affinities(t, f), "the container ended: its CPUs stay free")

	decline := f.runPod(podSpec{name: "decline", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev": "false"}})
	_, _, err = f.createContainer(decline, "c", 1000)
	require.Error(t, err, "the pool keeps its CPUs free of IRQs always")
	assert.Contains(t, err.Error(), "irqIsolation")

	rp.stop()
	second := startPlugin(t, f, desktop, statePath(f))
	require.NoError(t, second.p.FlushIsolation())
	assert.Equal(t, originalAffinities, affinities(t, f), "without the setting: everything as it was")
}

// refusingFS is the real file system where some IRQs refuse writes, as
// kernel-managed IRQs do (EIO).
type refusingFS struct {
	hostfiles.OS
	mu     sync.Mutex
	refuse map[string]syscall.Errno
}

func (r *refusingFS) WriteFile(path string, data []byte) error {
	r.mu.Lock()
	errno, ok := r.refuse[path]
	r.mu.Unlock()
	if ok {
		return &os.PathError{Op: "write", Path: path, Err: errno}
	}
	return r.OS.WriteFile(path, data)
}

// TestManagedIRQReported: an IRQ the kernel refuses to move stays, the
// others move, and the refusal is a metric, logged once. (The
// exclusive-non-isolcpus container gets CPU 1, lent by infra.)
func TestManagedIRQReported(t *testing.T) {
	f := irqNode(t)
	fsys := &refusingFS{refuse: map[string]syscall.Errno{filepath.Join(f.procRoot(), "irq/24/smp_affinity_list"): syscall.EIO}}
	rp := startPlugin(t, f, isolatedDesktop, statePath(f), func(p *Plugin) { p.isolationFS = fsys })
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	_, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, "0-15", affinities(t, f)["24"], "refused: left as it is")
	assert.Equal(t, "0,2-15", affinities(t, f)["0"], "the others moved")
	lines := 0
	for _, line := range strings.Split(rp.log.String(), "\n") {
		if strings.Contains(line, "irq/24/smp_affinity_list") {
			lines++
		}
	}
	assert.Equal(t, 1, lines, "logged once:\n%s", rp.log.String())
	assert.Contains(t, rp.log.String(), "kernel-managed")
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_host_files_refused Host files the kernel refuses to change (kernel-managed IRQs) or to restore, and journal records outside the roots it may restore; EINVAL is tried again at each rescan, the others not while the value stays the same.
# TYPE cpupool_host_files_refused gauge
cpupool_host_files_refused{owner="cpuset"} 0
cpupool_host_files_refused{owner="irq"} 1
# HELP cpupool_host_files_restore_refused Host files whose recorded original the plugin cannot put back: the kernel refuses it (EROFS: a read-only /proc/irq or /sys, as in an unprivileged pod) or the file is outside the roots it may restore; their originals stay in the journal. Counted in cpupool_host_files_refused too.
# TYPE cpupool_host_files_restore_refused gauge
cpupool_host_files_restore_refused{owner="cpuset"} 0
cpupool_host_files_restore_refused{owner="irq"} 0
`), "cpupool_host_files_refused", "cpupool_host_files_restore_refused"))
}

// manyIRQs is the /proc of a node of cpus CPUs in nodes NUMA nodes with
// n NIC queue IRQs, each allowed on every CPU, spread over the nodes.
func manyIRQs(cpus, nodes, n int) procfixture.Spec {
	all := make([]int, cpus)
	for i := range all {
		all[i] = i
	}
	spec := procfixture.Spec{CPUs: cpuset.New(all...), BootID: bootID}
	for i := range n {
		spec.IRQs = append(spec.IRQs, procfixture.IRQ{N: 32 + i, Affinity: cpuset.New(all...), Node: i % nodes, Description: "PCI-MSI edge mlx5_comp" + strconv.Itoa(i)})
	}
	return spec
}

// irqsAvoid tells whether no IRQ of spec, and not the default affinity,
// may use cpus, and if not, which may.
func irqsAvoid(f *fakeRuntime, spec procfixture.Spec, cpus cpuset.CPUSet) error {
	data, err := os.ReadFile(filepath.Join(f.procRoot(), "irq", "default_smp_affinity"))
	if err != nil {
		return err
	}
	def, err := irq.ParseMask(string(data))
	if err != nil {
		return err
	}
	if on := def.Intersection(cpus); !on.IsEmpty() {
		return fmt.Errorf("default_smp_affinity %s includes %s", strings.TrimSpace(string(data)), on)
	}
	for _, i := range spec.IRQs {
		data, err := os.ReadFile(filepath.Join(f.procRoot(), "irq", strconv.Itoa(i.N), "smp_affinity_list"))
		if err != nil {
			return err
		}
		set, err := cpuset.Parse(strings.TrimSpace(string(data)))
		if err != nil {
			return err
		}
		if on := set.Intersection(cpus); !on.IsEmpty() || set.IsEmpty() {
			return fmt.Errorf("IRQ %d (%s) includes %s", i.N, set, on)
		}
	}
	return nil
}

// TestIRQBurstIsCoalesced: a hundred IRQ-isolated exclusive containers of
// as many pods created in a burst, at the production pass timing, cost at
// most one pass per MinInterval of the burst and two more, not a hundred,
// and every CPU they hold ends free of IRQs. (The 128-CPU node, not the
// 384-CPU one: it starts faster under -race.)
func TestIRQBurstIsCoalesced(t *testing.T) {
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
	require.Eventually(t, func() bool { return recon.Status().Passes >= 1 }, 5*time.Second, time.Millisecond, "the first Synchronize's pass")
	time.Sleep(timing.Delay + timing.MinInterval) // nothing due any more
	before := recon.Status().Passes

	const pods = 100
	held := cpuset.New()
	start := time.Now()
	for i := range pods {
		pod := f.runPod(podSpec{name: "burst" + id(i), annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
		ctr, _, err := f.createContainer(pod, "c", 1000)
		require.NoError(t, err)
		held = held.Union(cpusOf(t, f, f.cpus(ctr)))
	}
	burst := time.Since(start)
	require.Equal(t, pods, held.Size(), "a CPU each")
	var last error
	require.Eventually(t, func() bool { last = irqsAvoid(f, spec, held); return last == nil }, 5*time.Second, 5*time.Millisecond, "IRQs off the held CPUs: %v", last)
	// Wait until no pass has run for a while: a pass still due runs
	// within MinInterval.
	passes, quiet, deadline := recon.Status().Passes, time.Now(), time.Now().Add(10*time.Second)
	for time.Since(quiet) < 5*timing.MinInterval {
		require.True(t, time.Now().Before(deadline), "passes still running (%d)", passes-before)
		time.Sleep(timing.Delay)
		if n := recon.Status().Passes; n != passes {
			passes, quiet = n, time.Now()
		}
	}
	require.NoError(t, irqsAvoid(f, spec, held))
	passes -= before
	bound := uint64(burst/timing.MinInterval) + 2
	t.Logf("%d creations in %s: %d passes (bound %d)", pods, burst, passes, bound)
	assert.LessOrEqual(t, passes, bound, "coalesced: a pass per %s of the burst (%s) and two more", timing.MinInterval, burst)
	assert.Positive(t, passes)
}

// partitionedDesktop offers isolated partitions to exclusive containers
// that ask.
var partitionedDesktop = testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15", isolatedPartition: optIn}
  shared: {cpus: "2-3,10-11"}
allowedNamespaces:
  exclusive: [telco]
`}

// runcCreates makes a container's cgroup with the cpuset files a 6.12
// kernel shows, and its ancestors' where they lack them, as runc does
// between the reply and the container's start.
func runcCreates(t testing.TB, f *fakeRuntime, ctr *api.Container) string {
	t.Helper()
	dir, err := cgroupDir(ctr.GetLinux().GetCgroupsPath())
	require.NoError(t, err)
	partitionable(t, f, dir)
	return dir
}

// runcWillCreate makes, before the container is created, the cgroup that
// runcCreates would make for the container name of pod (the fake
// runtime's cgroup path for it).
func runcWillCreate(t testing.TB, f *fakeRuntime, pod *api.PodSandbox, name string) {
	t.Helper()
	partitionable(t, f, pod.Linux.CgroupParent+"/ctr-"+pod.Name+"-"+name)
}

// partitionable makes cgroup dir and its ancestors with the cpuset files
// of a 6.7+ kernel, where they lack them. Each file appears with its
// content (written aside, then renamed), as a kernel's cgroup file does:
// the plugin's background pass may run meanwhile, and one that read a file
// os.WriteFile had created but not yet written recorded "" as its
// original, and restored "" (TestInvalidPartitionReported failed so once
// under load).
func partitionable(t testing.TB, f *fakeRuntime, dir string) {
	t.Helper()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		full := filepath.Join(f.cgroupRoot, d)
		require.NoError(t, os.MkdirAll(full, 0o755))
		for name, v := range map[string]string{"cpuset.cpus.exclusive": "", "cpuset.cpus.partition": "member"} {
			if _, err := os.Stat(filepath.Join(full, name)); err != nil {
				tmp, err := os.CreateTemp(f.cgroupRoot, ".fixture-*")
				require.NoError(t, err)
				_, err = tmp.WriteString(v + "\n")
				require.NoError(t, err)
				require.NoError(t, tmp.Chmod(0o644))
				require.NoError(t, tmp.Close())
				require.NoError(t, os.Rename(tmp.Name(), filepath.Join(full, name)))
			}
		}
	}
}

func cgroupFile(t *testing.T, f *fakeRuntime, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.cgroupRoot, dir, name))
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

// TestIsolatedPartitionLifecycle: a container that asks gets its cgroup
// made an isolated partition of its CPUs once the runtime has created it
// (the pass waits for it), its ancestors taking the CPUs; after a kill
// and restart the partition stays; when the container ends, every
// ancestor gets back exactly what it had. The pool's accounting is the
// same as without.
func TestIsolatedPartitionLifecycle(t *testing.T) {
	f := newFakeRuntime(t, true)
	first := startPlugin(t, f, partitionedDesktop, statePath(f))
	pod := f.runPod(podSpec{name: "rt", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "isolated-partition.cpupool.dev": "true"}})
	ctr, _, err := f.createContainer(pod, "loop", 2000)
	require.NoError(t, err)
	require.NoError(t, first.p.FlushIsolation(), "the cgroup does not exist yet: nothing, no error")
	dir := runcCreates(t, f, ctr)
	require.NoError(t, first.p.FlushIsolation())
	cpus := f.cpus(ctr)
	assert.Equal(t, "isolated", cgroupFile(t, f, dir, "cpuset.cpus.partition"))
	assert.Equal(t, cpus, cgroupFile(t, f, dir, "cpuset.cpus.exclusive"))
	assert.Equal(t, cpus, cgroupFile(t, f, "/kubepods", "cpuset.cpus.exclusive"))
	assert.Equal(t, cpus, cgroupFile(t, f, filepath.Dir(dir), "cpuset.cpus.exclusive"))
	free := usageOf(first.p, "exclusive").Free

	first.kill()
	second := startPlugin(t, f, partitionedDesktop, statePath(f))
	require.NoError(t, second.p.FlushIsolation())
	assert.Equal(t, "isolated", cgroupFile(t, f, dir, "cpuset.cpus.partition"), "kept across the restart")
	assert.Equal(t, cpus, cgroupFile(t, f, "/kubepods", "cpuset.cpus.exclusive"))
	assert.Equal(t, free, usageOf(second.p, "exclusive").Free, "accounting unchanged")

	f.stopContainer(ctr)
	require.NoError(t, os.RemoveAll(filepath.Join(f.cgroupRoot, dir)))
	require.NoError(t, second.p.FlushIsolation())
	assert.Equal(t, "", cgroupFile(t, f, "/kubepods", "cpuset.cpus.exclusive"))
	assert.Equal(t, "", cgroupFile(t, f, filepath.Dir(dir), "cpuset.cpus.exclusive"))
}

// TestPartitionWantsKept: the partitions' wants, asked for at every pass,
// name each container's cgroup directory and the container as before,
// from what was worked out at the first pass: no allocation per container
// after it (issue 45: cgroupDir and the name were made again at every
// pass, about 5 allocations per container); a container that ended is no
// longer wanted.
func TestPartitionWantsKept(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, partitionedDesktop, statePath(f))
	dirs := map[string]string{}
	var ctrs []*api.Container
	for _, name := range []string{"a", "b", "c", "d"} {
		pod := f.runPod(podSpec{name: "rt" + name, namespace: "telco", annotations: map[string]string{
			"pool.cpupool.dev": "exclusive", "isolated-partition.cpupool.dev": "true"}})
		ctr, _, err := f.createContainer(pod, "loop", 1000)
		require.NoError(t, err)
		dirs[runcCreates(t, f, ctr)] = "telco/rt" + name + "/loop"
		ctrs = append(ctrs, ctr)
	}
	got := func() map[string]string {
		m := map[string]string{}
		for _, w := range rp.p.partitionWants() {
			m[w.Dir] = w.Who
			assert.Equal(t, 1, w.CPUs.Size(), "%s's CPUs", w.Who)
		}
		return m
	}
	assert.Equal(t, dirs, got())
	assert.Equal(t, dirs, got(), "asked again")
	allocs := testing.AllocsPerRun(20, func() { rp.p.partitionWants() })
	assert.LessOrEqual(t, allocs, 1.0, "allocations of the wants of 4 partitions, asked again (the list)")
	f.stopContainer(ctrs[0])
	delete(dirs, runcCreates(t, f, ctrs[0]))
	assert.Equal(t, dirs, got(), "a container that ended")
}

// invalidatingFS is the real file system where the kernel takes
// "isolated" in a cpuset.cpus.partition and then finds the partition
// invalid, as it does when another cgroup has the CPUs exclusively.
type invalidatingFS struct{ hostfiles.OS }

const notExclusive = "isolated invalid (Cpu list in cpuset.cpus not exclusive)"

func (i invalidatingFS) WriteFile(path string, data []byte) error {
	if err := i.OS.WriteFile(path, data); err != nil || filepath.Base(path) != "cpuset.cpus.partition" || strings.TrimSpace(string(data)) != "isolated" {
		return err
	}
	return os.WriteFile(path, []byte(notExclusive+"\n"), 0o644)
}

// roProcIRQ is /proc/irq as an unprivileged container sees it: read-only
// (EROFS), as the chart's pod with privileged=false mounts it.
type roProcIRQ struct {
	hostfiles.OS
	under string
}

func (r roProcIRQ) WriteFile(path string, data []byte) error {
	if strings.HasPrefix(path, r.under+string(filepath.Separator)) {
		return &os.PathError{Op: "write", Path: path, Err: syscall.EROFS}
	}
	return r.OS.WriteFile(path, data)
}

// TestIRQRestoreRefusedReported: a helm upgrade that turns irqIsolation
// off and privileged to false in one step (review C-M6) leaves a pod that
// cannot write /proc/irq: the IRQs the old pod moved cannot be put back.
// That is no kernel-managed IRQ's refusal at apply, which every node with
// NVMe has and CpupoolHostFilesRefused leaves out: it is
// cpupool_host_files_restore_refused, which CpupoolHostFilesNotRestored
// alerts on. TestManagedIRQReported's refusal at apply is not in it.
func TestIRQRestoreRefusedReported(t *testing.T) {
	f := irqNode(t)
	node := testNode{fixture: desktop.fixture, config: strings.Replace(desktop.config, `exclusive: {cpus: "4-7,12-15"}`, `exclusive: {cpus: "4-7,12-15", irqIsolation: always}`, 1)}
	require.NotEqual(t, desktop.config, node.config)
	rp := startPlugin(t, f, node, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	moved := 0
	for irq, aff := range affinities(t, f) {
		if aff != originalAffinities[irq] {
			moved++
		}
	}
	require.NotZero(t, moved, "irqIsolation moved IRQs off the pool")
	rp.stop()
	rp.p.Close()

	second := startPlugin(t, f, desktop, statePath(f), func(p *Plugin) {
		p.isolationFS = roProcIRQ{under: filepath.Join(f.procRoot(), "irq")}
	})
	_ = second.p.FlushIsolation()
	require.NoError(t, testutil.GatherAndCompare(second.p.Registry(), strings.NewReader(fmt.Sprintf(`
# HELP cpupool_host_files_restore_refused Host files whose recorded original the plugin cannot put back: the kernel refuses it (EROFS: a read-only /proc/irq or /sys, as in an unprivileged pod) or the file is outside the roots it may restore; their originals stay in the journal. Counted in cpupool_host_files_refused too.
# TYPE cpupool_host_files_restore_refused gauge
cpupool_host_files_restore_refused{owner="cpuset"} 0
cpupool_host_files_restore_refused{owner="irq"} %d
# HELP cpupool_host_files_changed Host files the plugin changed and has not restored yet (their originals are in the journal), by owner (irq, cpuset, power, housekeeping, rps, workqueues).
# TYPE cpupool_host_files_changed gauge
cpupool_host_files_changed{owner="cpuset"} 0
cpupool_host_files_changed{owner="irq"} %d
`, moved, moved)), "cpupool_host_files_restore_refused", "cpupool_host_files_changed"))
}

// TestInvalidPartitionReported: a partition the kernel reads back as
// invalid is not taken as done: it is logged once with the container and
// the reason, counted as a refused cpuset file and a permanent error, and
// kept in the journal's refused files, which the audit reads; when the
// container ends its files are restored and the problem goes.
func TestInvalidPartitionReported(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, partitionedDesktop, statePath(f), func(p *Plugin) { p.isolationFS = invalidatingFS{} })
	pod := f.runPod(podSpec{name: "rt", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "isolated-partition.cpupool.dev": "true"}})
	ctr, _, err := f.createContainer(pod, "loop", 1000)
	require.NoError(t, err)
	dir := runcCreates(t, f, ctr)
	require.NoError(t, rp.p.FlushIsolation())
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, notExclusive, cgroupFile(t, f, dir, "cpuset.cpus.partition"))

	lines := 0
	for _, line := range strings.Split(rp.log.String(), "\n") {
		if strings.Contains(line, "invalid") {
			lines++
			assert.Contains(t, line, "container telco/rt/loop: the kernel made its isolated partition invalid (Cpu list in cpuset.cpus not exclusive)")
		}
	}
	assert.Equal(t, 1, lines, "logged once:\n%s", rp.log.String())
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_host_files_refused Host files the kernel refuses to change (kernel-managed IRQs) or to restore, and journal records outside the roots it may restore; EINVAL is tried again at each rescan, the others not while the value stays the same.
# TYPE cpupool_host_files_refused gauge
cpupool_host_files_refused{owner="cpuset"} 1
cpupool_host_files_refused{owner="irq"} 0
# HELP cpupool_host_file_errors_total Failed host file operations: transient ones are retried with backoff, permanent ones are not.
# TYPE cpupool_host_file_errors_total counter
cpupool_host_file_errors_total{kind="permanent"} 1
cpupool_host_file_errors_total{kind="transient"} 0
`), "cpupool_host_files_refused", "cpupool_host_file_errors_total"))
	file := filepath.Join(f.cgroupRoot, dir, "cpuset.cpus.partition")
	_, refused, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), "")
	require.NoError(t, err)
	assert.Contains(t, refused[file], "Cpu list in cpuset.cpus not exclusive", "for the audit")

	f.stopContainer(ctr)
	f.removeContainer(ctr)
	f.removePod(pod)
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, "member", cgroupFile(t, f, dir, "cpuset.cpus.partition"), "restored (the fixture's cgroup outlives the container)")
	assert.Empty(t, rp.p.isolation.Load().recon.Status().Failures)
}

// TestIsolatedPartitionOnCgroupV1: the container runs, without a
// partition, and the log says why.
func TestIsolatedPartitionOnCgroupV1(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, partitionedDesktop, statePath(f))
	pod := f.runPod(podSpec{name: "rt", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "isolated-partition.cpupool.dev": "true"}})
	_, _, err := f.createContainer(pod, "loop", 1000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	assert.Contains(t, rp.log.String(), "isolated partitions are configured, but cgroup v1")
	assert.Contains(t, rp.log.String(), "container telco/rt/loop: not in an isolated partition: cgroup v1")
}

// usageOf is a pool's usage as the allocator counts it now.
func usageOf(p *Plugin, pool string) allocator.PoolUsage {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range p.alloc.Usage() {
		if u.Pool == pool {
			return u
		}
	}
	return allocator.PoolUsage{}
}

// firstAuditOfIRQPod runs the audit metrics tests' node: the IRQ desktop
// whose /proc lists procs, the plugin with metrics, and a pod with IRQ
// isolation (telco/dpdk/fwd) on one exclusive CPU, its isolation applied.
// It waits for the first background audit and returns the registry to read
// its verdicts from and the container's CPU.
func firstAuditOfIRQPod(t *testing.T, procs []procfixture.Process) (*prometheus.Registry, string) {
	t.Helper()
	f := irqNode(t)
	procfixture.Write(t, f.procRoot(), procfixture.Spec{CPUs: desktopIRQs().CPUs, Processes: procs})
	rp := startPlugin(t, f, isolatedDesktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev": "true"}})
	ctr, _, err := f.createContainer(pod, "fwd", 1000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	reg := rp.p.Registry() // serving the metrics starts the audits
	require.Eventually(t, func() bool { a := rp.p.auditor.Load(); return a != nil && a.last.Load() != nil }, 10*time.Second, 10*time.Millisecond)
	return reg, f.cpus(ctr)
}

// TestAuditMetrics: with metrics served, the daemon audits the held
// exclusive CPUs in the background and exports the verdicts: the IRQs are
// off the isolated container's CPU, but a host process may still run
// there, so it is not clean.
func TestAuditMetrics(t *testing.T) {
	all := desktopIRQs().CPUs
	reg, cpu := firstAuditOfIRQPod(t, []procfixture.Process{
		{PID: 2, Comm: "kthreadd", Kernel: true, AllowedCPUs: all, Cgroup: "0::/"}, // the host's PID namespace
		{PID: 700, Comm: "sshd", AllowedCPUs: all, Cgroup: "0::/system.slice/ssh.service"}})
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP cpupool_exclusive_cpu_clean `+cleanHelp+`
# TYPE cpupool_exclusive_cpu_clean gauge
cpupool_exclusive_cpu_clean{cpu="`+cpu+`",pool="exclusive"} 0
# HELP cpupool_exclusive_cpu_foreign_threads `+foreignHelp+`
# TYPE cpupool_exclusive_cpu_foreign_threads gauge
cpupool_exclusive_cpu_foreign_threads{cpu="`+cpu+`",pool="exclusive"} 1
# HELP cpupool_audit_sees_host_threads `+seesHelp+`
# TYPE cpupool_audit_sees_host_threads gauge
cpupool_audit_sees_host_threads 1
`), "cpupool_exclusive_cpu_clean", "cpupool_exclusive_cpu_foreign_threads", "cpupool_audit_sees_host_threads"))
}

const (
	cleanHelp = "1 when the held exclusive CPU was clean at the last audit (no device IRQ fired on it, no user-space thread of another process may run on it), else 0; " +
		"absent when unknown: nothing else was found and the audit cannot see the host's processes (cpupool_audit_sees_host_threads 0)."
	foreignHelp = "User-space threads of other processes allowed on the held exclusive CPU at the last audit; absent when the audit cannot see the host's processes."
	seesHelp    = "1 when the last audit saw the host's processes (procRoot shows the host's PID namespace), 0 when it did not (a pod without hostPID): the threads that may run on held CPUs are then unknown."
)

// TestAuditMetricsWithoutTheHostsProcesses: where the proc root does not
// show the host's processes (no kthreadd as PID 2: a pod without hostPID,
// as the shipped DaemonSet runs), the audit finds no foreign thread on a
// held CPU because it sees none. The metrics do not say clean: the
// verdict and the thread count are absent, and
// cpupool_audit_sees_host_threads says why (review 58, item 2).
func TestAuditMetricsWithoutTheHostsProcesses(t *testing.T) {
	reg, cpu := firstAuditOfIRQPod(t, []procfixture.Process{{PID: 1, Comm: "nri-cpupool", AllowedCPUs: cpuset.New(0, 1), Cgroup: "0::/"}})
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP cpupool_audit_sees_host_threads `+seesHelp+`
# TYPE cpupool_audit_sees_host_threads gauge
cpupool_audit_sees_host_threads 0
# HELP cpupool_exclusive_cpu_device_irqs Device IRQs that fired on the held exclusive CPU during the last audit's one-second sample.
# TYPE cpupool_exclusive_cpu_device_irqs gauge
cpupool_exclusive_cpu_device_irqs{cpu="`+cpu+`",pool="exclusive"} 0
`), "cpupool_exclusive_cpu_clean", "cpupool_exclusive_cpu_foreign_threads", "cpupool_audit_sees_host_threads", "cpupool_exclusive_cpu_device_irqs"))
}

// TestJournalRecordsOutsideTheRootsAreNotRestored: a journal of this boot
// that names a file outside /proc/irq, /sys/devices/system/cpu and the
// cgroup root (under the configured roots) does not make the plugin write
// it; the record is reported as refused, and the IRQ records of the same
// journal are restored.
func TestJournalRecordsOutsideTheRootsAreNotRestored(t *testing.T) {
	f := irqNode(t)
	victim := filepath.Join(f.dir, "etc", "sudoers")
	require.NoError(t, os.MkdirAll(filepath.Dir(victim), 0o755))
	require.NoError(t, os.WriteFile(victim, []byte("root ALL=(ALL) ALL\n"), 0o644))
	irq24 := filepath.Join(f.procRoot(), "irq/24/smp_affinity_list")
	require.NoError(t, os.WriteFile(irq24, []byte("0-3\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Dir(statePath(f)), 0o755))
	j, _, err := hostfiles.OpenJournal(hostfiles.OS{}, hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	require.NoError(t, j.Commit(map[string]hostfiles.Record{
		victim: {Original: "ALL ALL=(ALL) NOPASSWD: ALL", Owner: "irq"},
		irq24:  {Original: "0-15", Owner: "irq"},
	}, nil))

	rp := startPlugin(t, f, isolatedDesktop, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	require.NoError(t, rp.p.FlushIsolation())
	data, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "root ALL=(ALL) ALL\n", string(data), "never written")
	assert.Equal(t, originalAffinities, affinities(t, f), "the IRQ record is restored")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Equal(t, []string{victim}, slices.Collect(maps.Keys(records)), "kept in the journal")
	st := rp.p.isolation.Load().recon.Status()
	require.Len(t, st.Failures, 1)
	assert.True(t, st.Failures[0].Untrusted)
	assert.Equal(t, 1, strings.Count(rp.log.String(), "the journal's record of "+victim+" is not restored"), "logged once:\n%s", rp.log.String())
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_host_files_refused Host files the kernel refuses to change (kernel-managed IRQs) or to restore, and journal records outside the roots it may restore; EINVAL is tried again at each rescan, the others not while the value stays the same.
# TYPE cpupool_host_files_refused gauge
cpupool_host_files_refused{owner="cpuset"} 0
cpupool_host_files_refused{owner="irq"} 1
`), "cpupool_host_files_refused"))
}

// unreadableJournalFS fails the reads of the journal until it is told
// the file is readable again (a disk error, a file the admin restores).
type unreadableJournalFS struct {
	hostfiles.OS
	journal  string
	mu       sync.Mutex
	broken   bool
	refusals int
}

func (u *unreadableJournalFS) ReadFile(path string) ([]byte, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if path == u.journal && u.broken {
		u.refusals++
		return nil, &os.PathError{Op: "read", Path: path, Err: syscall.EIO}
	}
	return u.OS.ReadFile(path)
}

func (u *unreadableJournalFS) fix() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.broken = false
}

// TestJournalReadErrorRetriedAtConfigure: the journal cannot be read at
// the first Configure; the plugin connects and pins all the same (before,
// a failed Configure pinned nothing), and once the journal reads, a
// retry (the Synchronize, or the background one) opens it and starts the
// reconciler (issue 30 defect 9). The earlier process's originals are
// restored, and a new isolated container gets its IRQs moved: isolation
// is not lost for the life of the process.
func TestJournalReadErrorRetriedAtConfigure(t *testing.T) {
	f := irqNode(t)
	first := startPlugin(t, f, isolatedDesktop, statePath(f))
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	ctr, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	require.NoError(t, first.p.FlushIsolation())
	requireIRQsOff(t, f, cpusOf(t, f, f.cpus(ctr)))
	first.kill()
	f.removeContainer(ctr)
	f.removePod(pod)

	fsys := &unreadableJournalFS{journal: hostfiles.JournalPath(statePath(f)), broken: true}
	second := startPluginTuned(t, f, isolatedDesktop, statePath(f), func(p *Plugin) {
		p.isolationFS = fsys
		// The first open fails on the journal; the journal reads
		// again before a retry.
		go func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				fsys.mu.Lock()
				n := fsys.refusals
				fsys.mu.Unlock()
				if n > 0 {
					fsys.fix()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	})
	fsys.mu.Lock()
	refused := fsys.refusals
	fsys.mu.Unlock()
	assert.Positive(t, refused, "the first open failed on the journal")
	require.Eventually(t, func() bool { return second.p.isolation.Load() != nil && second.p.IsolationReady() == nil },
		10*time.Second, 5*time.Millisecond, "a retry opened the journal")
	require.NoError(t, second.p.FlushIsolation())
	assert.Equal(t, originalAffinities, affinities(t, f), "the earlier process's originals restored")

	again := f.runPod(podSpec{name: "eni2", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	ctr, _, err = f.createContainer(again, "c", 1000)
	require.NoError(t, err)
	require.NoError(t, second.p.FlushIsolation())
	requireIRQsOff(t, f, cpusOf(t, f, f.cpus(ctr)))
}

// TestWidenedFilesAreNotCountedAsChanged: a cgroup's empty cpuset.cpus
// that the kernel takes only as its parent's CPUs keeps its record while
// the cgroup has tasks, for good on a host's system cgroup; counted as
// changed, cpupool_host_files_changed never fell to 0, which the removal
// and privileged=false steps wait for.
func TestWidenedFilesAreNotCountedAsChanged(t *testing.T) {
	st := hostfiles.Status{Records: map[string]int{"housekeeping": 3, "irq": 1}, Nearest: []string{"/sys/fs/cgroup/system/cpuset.cpus", "/gone"},
		NearestOwners: map[string]string{"/sys/fs/cgroup/system/cpuset.cpus": "housekeeping"}}
	changed, widened := changedAndWidened(st)
	assert.Equal(t, map[string]int{"housekeeping": 2, "irq": 1}, changed)
	assert.Equal(t, map[string]int{"housekeeping": 1}, widened)
	assert.Equal(t, map[string]int{"housekeeping": 3, "irq": 1}, st.Records, "the status is not changed")

	changed, widened = changedAndWidened(hostfiles.Status{})
	assert.Empty(t, changed)
	assert.Empty(t, widened)
}

// nearestJournalFS puts back IRQ 24's original only as "the nearest value"
// (hostfiles.ErrNearest, as a populated cgroup's empty cpuset.cpus is
// widened), so that the reconciler's Status names a nearest path, and can
// hold the journal's next write until the test lets it go.
type nearestJournalFS struct {
	hostfiles.OS
	nearest, journal string
	mu               sync.Mutex
	gate             chan struct{} // when set, the journal's next write waits for it
	entered          chan struct{}
}

func (n *nearestJournalFS) WriteFile(path string, data []byte) error {
	if path == n.nearest && strings.TrimSpace(string(data)) == "0-15" {
		if err := n.OS.WriteFile(path, data); err != nil {
			return err
		}
		return fmt.Errorf("%s: %w", path, hostfiles.ErrNearest)
	}
	return n.OS.WriteFile(path, data)
}

func (n *nearestJournalFS) ReplaceFile(path string, data []byte) error {
	n.mu.Lock()
	gate := n.gate
	if path == n.journal {
		n.gate = nil
	}
	n.mu.Unlock()
	if path == n.journal && gate != nil {
		n.entered <- struct{}{}
		<-gate
	}
	return n.OS.ReplaceFile(path, data)
}

// TestHostFilesMetricsDoNotReadTheJournalWhileAPassCommits: with a record
// held at its nearest value (cpupool_host_files_widened), a scrape counts
// the widened files by owner from the reconciler's Status alone: the
// journal has no lock, and only passes (under the reconciler's mu) may
// touch it, while a pass swaps its records (Journal.Commit) on its own
// goroutine. The scrape runs while a pass waits in the journal's write,
// and the pass goes on after, unordered with the scrape: a read of the
// journal by the scrape is reported under -race.
func TestHostFilesMetricsDoNotReadTheJournalWhileAPassCommits(t *testing.T) {
	f := irqNode(t)
	fsys := &nearestJournalFS{nearest: filepath.Join(f.procRoot(), "irq/24/smp_affinity_list"),
		journal: hostfiles.JournalPath(statePath(f)), entered: make(chan struct{}, 1)}
	rp := startPlugin(t, f, isolatedDesktop, statePath(f), func(p *Plugin) { p.isolationFS = fsys })
	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev/pod": "true"}})
	_, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	f.removePod(telco)
	require.NoError(t, rp.p.FlushIsolation())
	require.NotEmpty(t, rp.p.isolation.Load().recon.Status().Nearest, "IRQ 24 holds its nearest value")
	m := newIsolationMetrics(rp.p)
	assert.Equal(t, 1.0, hostFilesGauge(t, m, "cpupool_host_files_widened", "irq"), "IRQ 24 is counted as widened")
	assert.Equal(t, 0.0, hostFilesGauge(t, m, "cpupool_host_files_changed", "irq"), "not as changed")

	gate := make(chan struct{})
	fsys.mu.Lock()
	fsys.gate = gate
	fsys.mu.Unlock()
	again := f.runPod(podSpec{name: "dpdk2", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev/pod": "true"}})
	_, _, err = f.createContainer(again, "fwd", 2000)
	require.NoError(t, err)
	select {
	case <-fsys.entered: // the kicked pass records the new originals
	case <-time.After(5 * time.Second):
		t.Fatal("no pass wrote the journal")
	}
	go func() { // a scrape
		ch := make(chan prometheus.Metric, 1024)
		m.Collect(ch)
	}()
	time.Sleep(200 * time.Millisecond) // the scrape is done; nothing orders it before the pass's swap
	close(gate)
	require.NoError(t, rp.p.FlushIsolation())
}

// hostFilesGauge is the value of a host-files gauge of owner in a scrape
// of m.
func hostFilesGauge(t *testing.T, m prometheus.Collector, name, owner string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "owner" && l.GetValue() == owner {
					return mt.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{owner=%q} in the scrape", name, owner)
	return 0
}
