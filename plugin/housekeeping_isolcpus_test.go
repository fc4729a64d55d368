package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/internal/procfs"
	"github.com/cpupool/nri-cpupool/irq"
)

// isolcpusNode is xeon-2s-interleaved (isolcpus=domain on every CPU but
// core 0 of each socket: 2-39,42-79) with nothing configured but the
// pools: the default config.
var isolcpusNode = testNode{fixture: "xeon-2s-interleaved", config: ""}

// isolcpusFiles are the host files of the fake node as it booted: the
// workqueue mask of its 80 CPUs, system (empty: every CPU, as the
// runtime's enabling of cpuset at the root left it) next to the pods'
// tree.
var isolcpusFiles = map[string]string{"workqueue": "ffff,ffffffff,ffffffff", "system": "", "kubepods": ""}

// isolcpusHost are the CPUs host processes had at boot: not isolated.
var isolcpusHost = cpuset.New(0, 1, 40, 41)

func isolcpusFakeNode(t *testing.T) *fakeRuntime {
	t.Helper()
	f := newFakeRuntime(t, true)
	write := func(path, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o644))
	}
	write(filepath.Join(f.cgroupRoot, "cgroup.subtree_control"), "cpuset cpu memory")
	for _, dir := range []string{"system", "kubepods"} {
		write(filepath.Join(f.cgroupRoot, dir, "cpuset.cpus"), isolcpusFiles[dir])
	}
	write(filepath.Join(f.sysfsRoot(isolcpusNode.fixture), housekeeping.WorkqueueMask), isolcpusFiles["workqueue"])
	write(filepath.Join(f.procRoot(), "sys/kernel/random/boot_id"), bootID)
	write(filepath.Join(f.procRoot(), "1/comm"), "init")
	// The host's PID namespace: kthreadd is PID 2 (SeesHostThreads).
	write(filepath.Join(f.procRoot(), "2/stat"), fmt.Sprintf("2 (kthreadd) S 0 0 0 0 -1 %d 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0", procfs.PFKthread))
	return f
}

// TestIsolcpusNotKeptWithoutHostPIDs: in a container without the host's
// PID namespace (no kthreadd as PID 2: a DaemonSet pod without hostPID)
// the default leaves every host file alone, since the host processes'
// affinities a confinement resets could be neither recorded nor given
// back, and says so and what to do.
func TestIsolcpusNotKeptWithoutHostPIDs(t *testing.T) {
	f := isolcpusFakeNode(t)
	require.NoError(t, os.Remove(filepath.Join(f.procRoot(), "2/stat")))
	rp := startPlugin(t, f, isolcpusNode, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, isolcpusFiles, isolcpusNow(t, f), "nothing confined")
	assert.Nil(t, rp.p.isolation.Load().housekeeping, "no source")
	assert.Contains(t, rp.log.String(), "keepHostOffIsolcpus: host processes are not kept off the pools' isolcpus= CPUs 2-39,42-79")
	assert.Contains(t, rp.log.String(), "hostPID: true")
}

func isolcpusNow(t *testing.T, f *fakeRuntime) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name := range isolcpusFiles {
		path := filepath.Join(f.cgroupRoot, name, "cpuset.cpus")
		if name == "workqueue" {
			path = filepath.Join(f.sysfsRoot(isolcpusNode.fixture), housekeeping.WorkqueueMask)
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		out[name] = strings.TrimSpace(string(data))
	}
	return out
}

// addUserThread writes a single-threaded user-space process into the fake
// /proc, in cgroup (a cgroup v2 path), and its affinity into k.
func (k *threadKernel) addUserThread(t *testing.T, f *fakeRuntime, pid int, comm, cgroup string, start uint64, affinity cpuset.CPUSet) {
	t.Helper()
	line := fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, comm, pid, pid, start)
	pdir := filepath.Join(f.procRoot(), fmt.Sprint(pid))
	for path, content := range map[string]string{
		filepath.Join(pdir, "stat"):                          line,
		filepath.Join(pdir, "cgroup"):                        "0::" + cgroup + "\n",
		filepath.Join(pdir, "task", fmt.Sprint(pid), "stat"): line,
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.aff[pid] = affinity
}

// TestIsolcpusKeptFreeByDefault (issue 42, item 2): with nothing
// configured but the pools, on cgroup v2 the host's top-level cgroups
// lose the exclusive pool's isolcpus= CPUs before any container holds
// one, and a host thread already on them (its affinity reset to every CPU
// by the runtime's enabling of cpuset at the root) is moved off them,
// recorded first. A restart that turns keepHostOffIsolcpus off, after a
// clean stop or a kill -9, puts every file and affinity back exactly;
// the pods' tree and a process's own narrower affinity are never
// touched.
func TestIsolcpusKeptFreeByDefault(t *testing.T) {
	all := cpuset.New()
	for c := range 80 {
		all = all.Union(cpuset.New(c))
	}
	off := testNode{fixture: isolcpusNode.fixture, config: "keepHostOffIsolcpus: false\n"}
	for _, tc := range []struct {
		name string
		stop func(rp *runningPlugin)
	}{
		{"restart", func(rp *runningPlugin) { rp.stop() }},
		{"kill -9", func(rp *runningPlugin) { rp.kill() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := isolcpusFakeNode(t)
			k := &threadKernel{aff: map[int]cpuset.CPUSet{}}
			// Reset by the root's cpuset: on every CPU, isolated ones too.
			k.addUserThread(t, f, 500, "stress-ng", "/system/load.service", 100, all)
			// Its own choice, on host CPUs only: left alone.
			k.addUserThread(t, f, 600, "sshd", "/system/ssh.service", 100, cpuset.New(0, 40))
			k.addKernelThread(t, f, 2, "kthreadd", 1, all)
			withThreads := func(p *Plugin) { p.isolationFS = housekeeping.NewAffinityFS(hostfiles.OS{}, f.procRoot(), k) }

			first := startPlugin(t, f, isolcpusNode, statePath(f), withThreads)
			require.NoError(t, first.p.FlushIsolation())
			assert.Equal(t, map[string]string{"workqueue": "0000,00000300,00000003", "system": isolcpusHost.String(), "kubepods": ""}, isolcpusNow(t, f),
				"no container yet: the pools' isolated CPUs are kept free, the pods' tree untouched")
			assert.Equal(t, isolcpusHost.String(), k.get(500), "moved off the isolated CPUs")
			assert.Equal(t, "0,40", k.get(600), "its own affinity")
			assert.Equal(t, isolcpusHost.String(), k.get(2), "unbound kernel thread")
			records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
			require.NoError(t, err)
			assert.Equal(t, all.String(), records[housekeeping.AffinityPath(500, 100)].Original, "recorded before it was moved")

			tc.stop(first)
			second := startPlugin(t, f, off, statePath(f), withThreads)
			require.NoError(t, second.p.FlushIsolation())
			assert.Equal(t, isolcpusFiles, isolcpusNow(t, f), "turned off: every file exactly as it was")
			assert.Equal(t, all.String(), k.get(500))
			assert.Equal(t, "0,40", k.get(600))
			assert.Equal(t, all.String(), k.get(2))
			// The restart releases as one process does:
			// its second pass drops the records (the worker makes it
			// right after; here, made now).
			require.NoError(t, second.p.FlushIsolation())
			records, _, _, err = hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
			require.NoError(t, err)
			assert.Empty(t, records)
		})
	}
}

// TestIsolcpusLeftToInfraNotKept: an isolcpus= CPU that the pools leave
// to infra (the exclusive pool listed smaller than the isolated set) is
// lent to host work: the unbound kernel work keeps it. (Host processes
// never had it: PID 1's affinity leaves every isolated CPU out, and the
// cgroups get the host's CPUs without them.) With no isolated CPU in the
// pools nothing is changed at all.
func TestIsolcpusLeftToInfraNotKept(t *testing.T) {
	f := isolcpusFakeNode(t)
	rp := startPlugin(t, f, testNode{fixture: isolcpusNode.fixture, config: `
pools:
  exclusive: {cpus: "2-3,42-43"}
`}, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, map[string]string{"workqueue": "ffff,fffff3ff,fffffff3", "system": isolcpusHost.String(), "kubepods": ""}, isolcpusNow(t, f),
		"only the exclusive pool's isolated CPUs are kept")
	rp.stop()

	g := isolcpusFakeNode(t)
	rp = startPlugin(t, g, testNode{fixture: "desktop-8c16t", config: `isolatedCPUs: "2-7,10-15"`}, statePath(g))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, isolcpusFiles, isolcpusNow(t, g), "isolatedCPUs that the kernel does not isolate: not kept")
	assert.Nil(t, rp.p.isolation.Load().housekeeping, "no source")
}

// TestIsolcpusKeptReload: keepHostOffIsolcpus follows a reload: started
// with it off nothing is changed; a reload that turns it on keeps the
// CPUs free (the host files' sources are made again for it); one that
// turns it off restores every file and affinity exactly, without a
// restart.
func TestIsolcpusKeptReload(t *testing.T) {
	f := isolcpusFakeNode(t)
	all := cpuset.New()
	for c := range 80 {
		all = all.Union(cpuset.New(c))
	}
	k := &threadKernel{aff: map[int]cpuset.CPUSet{}}
	k.addUserThread(t, f, 500, "stress-ng", "/system/load.service", 100, all)
	rp := startPlugin(t, f, testNode{fixture: isolcpusNode.fixture, config: "keepHostOffIsolcpus: false\n"}, statePath(f), func(p *Plugin) {
		p.isolationFS = housekeeping.NewAffinityFS(hostfiles.OS{}, f.procRoot(), k)
	})
	require.NoError(t, rp.p.FlushIsolation())
	require.Equal(t, isolcpusFiles, isolcpusNow(t, f), "off: nothing changed")

	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, ""), nil, "test"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, isolcpusHost.String(), isolcpusNow(t, f)["system"])
		assert.Equal(c, isolcpusHost.String(), k.get(500))
	}, 5*time.Second, 10*time.Millisecond, "turned on by a reload")

	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, "keepHostOffIsolcpus: false\n"), nil, "test"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, isolcpusFiles, isolcpusNow(t, f))
		assert.Equal(c, all.String(), k.get(500))
	}, 5*time.Second, 10*time.Millisecond, "turned off by a reload: exactly as before")
}

// TestIsolcpusKeptWithWorkqueues: keepHostOffIsolcpus (the default) and
// kernelWork.workqueues, no pool with housekeeping: the global workqueue
// mask has one owner, the workqueue source, which takes the held CPU out
// of it; housekeeping keeps the host's cgroups off the isolated CPUs and
// leaves the mask (the kernel keeps isolcpus= CPUs out of it itself).
func TestIsolcpusKeptWithWorkqueues(t *testing.T) {
	f := isolcpusFakeNode(t)
	rp := startPlugin(t, f, testNode{fixture: isolcpusNode.fixture, config: "kernelWork: {workqueues: held}\n"}, statePath(f))
	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation(), "one owner per file")
	held := cpusOf(t, f, f.cpus(fwd))
	mask, err := irq.ParseMask(isolcpusNow(t, f)["workqueue"])
	require.NoError(t, err)
	assert.True(t, mask.Intersection(held).IsEmpty(), "the held CPUs %s out of the global mask %s", held, mask)
	assert.Equal(t, isolcpusHost.String(), isolcpusNow(t, f)["system"], "the host's cgroups off the isolated CPUs")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Equal(t, "workqueues", records[filepath.Join(f.sysfsRoot(isolcpusNode.fixture), housekeeping.WorkqueueMask)].Owner)
}

// TestReloadToIsolatedCPUsKeepsHostOff: a reload that changes only
// isolatedCPUs (not pools.*, irq, power, keepHostOffIsolcpus or
// kernelWork) gives the exclusive pool the kernel's isolcpus= CPUs. A
// restart with that config keeps host processes off them (the default
// keepHostOffIsolcpus: TestIsolcpusKeptFreeByDefault); the reload must do
// the same (twin rule). The isolation sources were made again only when
// a hand list of keys changed, which lacked isolatedCPUs and reservedCPUs,
// so the housekeeping source, nil at start, was never made.
func TestReloadToIsolatedCPUsKeepsHostOff(t *testing.T) {
	f := isolcpusFakeNode(t)
	rp := startPlugin(t, f, testNode{fixture: isolcpusNode.fixture, config: "isolatedCPUs: \"\"\n"}, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	require.Equal(t, isolcpusFiles, isolcpusNow(t, f), "no isolated CPU in the pools: nothing changed")

	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, ""), nil, "test"))
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, isolcpusHost.String(), isolcpusNow(t, f)["system"])
	}, 3*time.Second, 10*time.Millisecond, "a reload to the default config keeps host processes off the exclusive pool's isolcpus= CPUs, as a restart with it does")
}
