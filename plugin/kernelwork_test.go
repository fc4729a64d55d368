package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/irq"
	"github.com/cpupool/nri-cpupool/kernelwork"
)

// kernelWorkDesktop is desktop with RPS and unbound workqueues kept off
// the CPUs its exclusive containers hold, and no housekeeping (the
// workqueue source owns the global mask).
var kernelWorkDesktop = testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
kernelWork:
  receivePacketSteering: held
  workqueues: held
`}

// kernelWorkFiles are the masks of the fake node as it booted, by name:
// a NIC's queue steered to every CPU, a pod's veth with RPS off, the
// global workqueue mask and writeback's.
var kernelWorkFiles = map[string]string{"eth0": "ffff", "veth": "0000", "wq": "ffff", "writeback": "ffff"}

func kernelWorkPath(f *fakeRuntime, name string) string {
	sys := f.sysfsRoot(desktop.fixture)
	switch name {
	case "eth0":
		return filepath.Join(sys, kernelwork.NetClass, "eth0/queues/rx-0/rps_cpus")
	case "veth":
		return filepath.Join(sys, kernelwork.NetClass, "veth3c1/queues/rx-0/rps_cpus")
	case "wq":
		return filepath.Join(sys, kernelwork.GlobalWorkqueueMask)
	}
	return filepath.Join(sys, kernelwork.WorkqueueDir, name, "cpumask")
}

// kernelWorkNode is a fake runtime whose sysfs has the masks, network
// devices laid out as the kernel does (a symlink to the device's
// directory below sys/devices).
func kernelWorkNode(t *testing.T) *fakeRuntime {
	t.Helper()
	f := newFakeRuntime(t, true)
	write := func(path, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o644))
	}
	sys := f.sysfsRoot(desktop.fixture)
	for name, dir := range map[string]string{"eth0": "sys/devices/pci0000:00/0000:00:03.0/net/eth0", "veth3c1": "sys/devices/virtual/net/veth3c1"} {
		key := map[string]string{"eth0": "eth0", "veth3c1": "veth"}[name]
		write(filepath.Join(sys, dir, "queues/rx-0/rps_cpus"), kernelWorkFiles[key])
		write(filepath.Join(sys, dir, "ifindex"), fmt.Sprint(len(name)))
		require.NoError(t, os.MkdirAll(filepath.Join(sys, kernelwork.NetClass), 0o755))
		require.NoError(t, os.Symlink(filepath.Join(sys, dir), filepath.Join(sys, kernelwork.NetClass, name)))
	}
	write(kernelWorkPath(f, "wq"), kernelWorkFiles["wq"])
	write(kernelWorkPath(f, "writeback"), kernelWorkFiles["writeback"])
	write(filepath.Join(f.procRoot(), "sys/kernel/random/boot_id"), bootID)
	return f
}

func kernelWorkNow(t *testing.T, f *fakeRuntime) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name := range kernelWorkFiles {
		data, err := os.ReadFile(kernelWorkPath(f, name))
		require.NoError(t, err)
		out[name] = strings.TrimSpace(string(data))
	}
	return out
}

// kernelWorkFor is what the masks hold while cpus are held.
func kernelWorkFor(cpus cpuset.CPUSet) map[string]string {
	mask := 0xffff
	for _, c := range cpus.List() {
		mask &^= 1 << c
	}
	m := fmt.Sprintf("%04x", mask)
	return map[string]string{"eth0": m, "veth": "0000", "wq": m, "writeback": m}
}

// TestKernelWorkFollowsGrants: a granted exclusive CPU leaves the
// rps_cpus and workqueue masks in the background pass the grant kicks,
// and comes back, each mask exactly as it was, when the pod ends; a veth
// with RPS off is left alone.
func TestKernelWorkFollowsGrants(t *testing.T) {
	f := kernelWorkNode(t)
	rp := startPlugin(t, f, kernelWorkDesktop, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, kernelWorkFiles, kernelWorkNow(t, f), "nothing held: nothing changed")

	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)
	held := cpusOf(t, f, f.cpus(fwd))
	require.Equal(t, 2, held.Size())
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, kernelWorkFor(held), kernelWorkNow(t, f))
	}, 5*time.Second, 10*time.Millisecond, "within a pass of the grant")
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_host_files_changed Host files the plugin changed and has not restored yet (their originals are in the journal), by owner (irq, cpuset, power, housekeeping, rps, workqueues).
# TYPE cpupool_host_files_changed gauge
cpupool_host_files_changed{owner="cpuset"} 0
cpupool_host_files_changed{owner="irq"} 0
cpupool_host_files_changed{owner="rps"} 1
cpupool_host_files_changed{owner="workqueues"} 2
`), "cpupool_host_files_changed"))

	f.removePod(telco)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, kernelWorkFiles, kernelWorkNow(t, f))
	}, 5*time.Second, 10*time.Millisecond, "released: every mask exactly as it was")
	require.NoError(t, rp.p.FlushIsolation())
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestKernelWorkAfterKill: the plugin is killed while the masks are
// narrowed. The next one, with the knobs off, puts every mask back
// exactly (the container still running); with them on, it keeps them
// narrowed from the originals.
func TestKernelWorkAfterKill(t *testing.T) {
	for _, tc := range []struct {
		name string
		next testNode
	}{
		{"restart with the knobs off", desktop},
		{"restart with the knobs on", kernelWorkDesktop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := kernelWorkNode(t)
			first := startPlugin(t, f, kernelWorkDesktop, statePath(f))
			pod := f.runPod(podSpec{name: "eni", namespace: "default", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
			ctr, _, err := f.createContainer(pod, "app", 1000)
			require.NoError(t, err)
			require.NoError(t, first.p.FlushIsolation())
			held := cpusOf(t, f, f.cpus(ctr))
			require.Equal(t, kernelWorkFor(held), kernelWorkNow(t, f))
			first.kill()

			second := startPlugin(t, f, tc.next, statePath(f))
			require.NoError(t, second.p.FlushIsolation())
			if tc.next.config != kernelWorkDesktop.config {
				assert.Equal(t, kernelWorkFiles, kernelWorkNow(t, f), "every mask exactly as it was")
				assert.NotContains(t, second.log.String(), "no source of this process claims", "its own records, not another version's")
				return
			}
			assert.Equal(t, kernelWorkFor(held), kernelWorkNow(t, f))
			f.removeContainer(ctr)
			f.removePod(pod)
			require.NoError(t, second.p.FlushIsolation())
			assert.Equal(t, kernelWorkFiles, kernelWorkNow(t, f))
		})
	}
}

// TestKernelWorkReload: a reload that turns the knobs on (the plugin
// started without them: no source yet) narrows the masks; one that turns
// a knob off gives its masks back exactly (the container still running),
// the other knob's stay narrowed.
func TestKernelWorkReload(t *testing.T) {
	f := kernelWorkNode(t)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, kernelWorkFiles, kernelWorkNow(t, f), "knobs off")
	held := cpusOf(t, f, f.cpus(fwd))

	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, kernelWorkDesktop.config), nil, "test"))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, kernelWorkFor(held), kernelWorkNow(t, f), "knobs on")

	rpsOff := strings.Replace(kernelWorkDesktop.config, "receivePacketSteering: held", "receivePacketSteering: \"off\"", 1)
	require.NotEqual(t, kernelWorkDesktop.config, rpsOff)
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, rpsOff), nil, "test"))
	require.NoError(t, rp.p.FlushIsolation())
	want := kernelWorkFor(held)
	want["eth0"] = kernelWorkFiles["eth0"]
	assert.Equal(t, want, kernelWorkNow(t, f), "RPS off: eth0's mask as it was; the workqueues' still narrowed")

	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktop.config), nil, "test"))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, kernelWorkFiles, kernelWorkNow(t, f), "both off: every mask as it was")
	assert.Equal(t, "4,12", f.cpus(fwd))
}

// TestKernelWorkWithHousekeeping: with housekeeping on, the global
// workqueue mask is housekeeping's alone (no pass finds two owners of
// it), narrowed to the housekeeping set; writeback's own mask is the
// workqueue knob's; both come back exactly.
func TestKernelWorkWithHousekeeping(t *testing.T) {
	f := housekeptNode(t)
	sys := f.sysfsRoot(desktop.fixture)
	writeback := filepath.Join(sys, kernelwork.WorkqueueDir, "writeback", "cpumask")
	require.NoError(t, os.MkdirAll(filepath.Dir(writeback), 0o755))
	require.NoError(t, os.WriteFile(writeback, []byte("ffff\n"), 0o644))
	node := testNode{fixture: desktop.fixture, config: housekeptDesktop.config + "kernelWork: {workqueues: held}\n"}
	rp := startPlugin(t, f, node, statePath(f))
	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation(), "one owner per file")
	held := cpusOf(t, f, f.cpus(fwd))
	assert.Equal(t, housekeptFor(t, held), housekeptNow(t, f))
	read := func() string {
		data, err := os.ReadFile(writeback)
		require.NoError(t, err)
		return strings.TrimSpace(string(data))
	}
	assert.Equal(t, kernelWorkFor(held)["writeback"], read())
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Equal(t, "housekeeping", records[filepath.Join(sys, kernelwork.GlobalWorkqueueMask)].Owner)

	f.removePod(telco)
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, housekeptFiles, housekeptNow(t, f))
	assert.Equal(t, "ffff", read())
}

// TestKernelWorkHeldCPUOfPoolWithoutHousekeeping: one pool has
// housekeeping (so the global workqueue mask is housekeeping's), the
// other has not; a CPU a container of the other pool holds leaves the
// global mask all the same while kernelWork.workqueues is held, alone
// and next to a housekept CPU, and comes back when its pod ends.
func TestKernelWorkHeldCPUOfPoolWithoutHousekeeping(t *testing.T) {
	f := housekeptNode(t)
	sys := f.sysfsRoot(desktop.fixture)
	global := filepath.Join(sys, kernelwork.GlobalWorkqueueMask)
	node := testNode{fixture: desktop.fixture, config: strings.Replace(housekeptDesktop.config,
		"exclusive-non-isolcpus: {enabled: true, housekeeping: held}", "exclusive-non-isolcpus: {enabled: true}", 1) +
		"kernelWork: {workqueues: held}\n"}
	require.NotEqual(t, housekeptDesktop.config+"kernelWork: {workqueues: held}\n", node.config)
	rp := startPlugin(t, f, node, statePath(f))
	read := func() cpuset.CPUSet {
		data, err := os.ReadFile(global)
		require.NoError(t, err)
		set, err := irq.ParseMask(strings.TrimSpace(string(data)))
		require.NoError(t, err)
		return set
	}

	eni := f.runPod(podSpec{name: "eni", namespace: "default", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	lent, _, err := f.createContainer(eni, "app", 1000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	lentCPUs := cpusOf(t, f, f.cpus(lent))
	assert.True(t, read().Intersection(lentCPUs).IsEmpty(), "the held CPU %s of a pool without housekeeping is out of the global mask %s", lentCPUs, read())

	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation(), "one owner per file")
	held := cpusOf(t, f, f.cpus(fwd))
	assert.True(t, read().Intersection(held.Union(lentCPUs)).IsEmpty(), "both held CPUs %s and %s are out of the global mask %s", held, lentCPUs, read())
	assert.Equal(t, cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15).Difference(held).Difference(lentCPUs), read())

	f.removePod(eni)
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15).Difference(held), read(), "the lent CPU back, the housekept one still out")

	f.removePod(telco)
	require.NoError(t, rp.p.FlushIsolation())
	data, err := os.ReadFile(global)
	require.NoError(t, err)
	assert.Equal(t, "ffff", strings.TrimSpace(string(data)), "exactly as it was")
}

// TestWorkqueueMaskHandedOverKeptWhileHousekeepingCannotPlan: the global
// workqueue mask, narrowed by kernelWork.workqueues while no pool had
// housekeeping, is housekeeping's after a reload gives a pool
// housekeeping. A pass in which housekeeping cannot plan (the cgroup
// root unreadable for now) leaves it narrowed: the first pass after the
// reload, or a later one, the journal still naming "workqueues".
// Restoring it would put unbound kernel work back on the held CPUs for
// that pass.
func TestWorkqueueMaskHandedOverKeptWhileHousekeepingCannotPlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		// planned: housekeeping planned the mask before its plan failed.
		planned bool
	}{{"the first pass after the reload fails", false}, {"a later pass fails", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := housekeptNode(t)
			global := filepath.Join(f.sysfsRoot(desktop.fixture), kernelwork.GlobalWorkqueueMask)
			read := func() string {
				data, err := os.ReadFile(global)
				require.NoError(t, err)
				return strings.TrimSpace(string(data))
			}
			owner := func() string {
				records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
				require.NoError(t, err)
				return records[global].Owner
			}
			withHousekeeping := housekeptDesktop.config + "kernelWork: {workqueues: held}\n"
			without := strings.ReplaceAll(withHousekeeping, ", housekeeping: held}", "}")
			require.NotContains(t, without, "housekeeping")
			rp := startPlugin(t, f, testNode{fixture: desktop.fixture, config: without}, statePath(f))
			telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
			fwd, _, err := f.createContainer(telco, "fwd", 2000)
			require.NoError(t, err)
			require.NoError(t, rp.p.FlushIsolation())
			narrowed := kernelWorkFor(cpusOf(t, f, f.cpus(fwd)))["wq"]
			require.Equal(t, narrowed, read(), "kernelWork.workqueues narrows it")
			require.Equal(t, kernelwork.WorkqueueOwner, owner())

			// housekeeping's plan fails while cgroup.subtree_control
			// cannot be read (a directory here: EISDIR, root or not).
			subtree := filepath.Join(f.cgroupRoot, "cgroup.subtree_control")
			if !tc.planned {
				require.NoError(t, os.Remove(subtree))
				require.NoError(t, os.Mkdir(subtree, 0o755))
			}
			require.NoError(t, rp.p.Reload(reloadConfig(t, rp, withHousekeeping), nil, "test"))
			if tc.planned {
				require.NoError(t, rp.p.FlushIsolation())
				require.Equal(t, narrowed, read(), "housekeeping's now")
				require.Equal(t, kernelwork.WorkqueueOwner, owner(), "the record keeps the owner that recorded it")
				require.NoError(t, os.Remove(subtree))
				require.NoError(t, os.Mkdir(subtree, 0o755))
			}
			require.ErrorContains(t, rp.p.FlushIsolation(), "housekeeping: planning")
			assert.Equal(t, narrowed, read(), "housekeeping's plan failed: kept")

			require.NoError(t, os.Remove(subtree))
			require.NoError(t, os.WriteFile(subtree, []byte("cpuset cpu memory\n"), 0o644))
			f.removePod(telco)
			require.NoError(t, rp.p.FlushIsolation())
			assert.Equal(t, "ffff", read(), "released: exactly as it was")
		})
	}
}
