package housekeeping

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/crashfs"
	"github.com/cpupool/nri-cpupool/internal/procfs"
)

// fakeKernel is the kernel's thread affinities: ESRCH for a thread it
// does not have, and the refusals a test sets (of a change: the mask a
// thread has is taken back).
type fakeKernel struct {
	mu     sync.Mutex
	aff    map[int]cpuset.CPUSet
	refuse map[int]error
}

func (k *fakeKernel) Get(tid int) (cpuset.CPUSet, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	a, ok := k.aff[tid]
	if !ok {
		return cpuset.New(), syscall.ESRCH
	}
	return a, nil
}

func (k *fakeKernel) Set(tid int, cpus cpuset.CPUSet) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.aff[tid]; !ok {
		return syscall.ESRCH
	}
	if err := k.refuse[tid]; err != nil && !cpus.Equals(k.aff[tid]) {
		return err // a change refused; what it has is taken
	}
	k.aff[tid] = cpus
	return nil
}

// affinities are every thread's affinity, as CPU lists.
func (k *fakeKernel) affinities() map[int]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[int]string{}
	for tid, a := range k.aff {
		out[tid] = a.String()
	}
	return out
}

// A fake thread of the node's /proc.
type fakeThread struct {
	pid, tid int
	comm     string
	flags    uint64
	start    uint64
	cgroup   string // /proc/<pid>/cgroup (v1: one line per hierarchy)
	affinity string
}

const (
	v1System = "4:cpuset:/system.slice\n1:name=systemd:/system.slice/sshd.service"
	v1Pods   = "4:cpuset:/kubepods/burstable/pod1/ctr\n1:name=systemd:/kubepods/burstable/pod1/ctr"
	v1Root   = "4:cpuset:/\n1:name=systemd:/init.scope"
	self     = 999
)

// hostThreads are a cgroup v1 node's threads: kernel threads (kthreadd,
// a per-CPU one the kernel keeps, one pinned to CPU 3, a node's kswapd on
// CPUs 6-7, all of them kept, so it gets the host's, and one the kernel
// refuses to move), host processes (sshd with two threads, PID 1, one
// that pinned itself to CPUs 6-7, one to 1-7), a container's process in
// the pods' tree, one in a pod cgroup of another name, and the plugin.
var hostThreads = []fakeThread{
	{pid: 2, tid: 2, comm: "kthreadd", flags: procfs.PFKthread, start: 1, cgroup: v1Root, affinity: "0-7"},
	{pid: 10, tid: 10, comm: "ksoftirqd/0", flags: procfs.PFKthread | procfs.PFNoSetAffinity, start: 2, cgroup: v1Root, affinity: "0"},
	{pid: 11, tid: 11, comm: "irq/9-acpi", flags: procfs.PFKthread, start: 3, cgroup: v1Root, affinity: "3"},
	{pid: 12, tid: 12, comm: "kswapd1", flags: procfs.PFKthread, start: 4, cgroup: v1Root, affinity: "6-7"},
	{pid: 13, tid: 13, comm: "rcu_preempt", flags: procfs.PFKthread, start: 5, cgroup: v1Root, affinity: "0-7"},
	{pid: 1, tid: 1, comm: "systemd", start: 1, cgroup: v1Root, affinity: "0-7"},
	{pid: 100, tid: 100, comm: "sshd", start: 100, cgroup: v1System, affinity: "0-7"},
	{pid: 100, tid: 101, comm: "sshd worker", start: 101, cgroup: v1System, affinity: "1-7"},
	{pid: 200, tid: 200, comm: "dpdk (fwd)", start: 200, cgroup: v1Pods, affinity: "0-7"},
	{pid: 201, tid: 201, comm: "pause", start: 201, cgroup: "4:cpuset:/custompods/pod2\n1:name=systemd:/custompods/pod2", affinity: "0-7"},
	{pid: 300, tid: 300, comm: "pinned", start: 300, cgroup: v1System, affinity: "6-7"},
	{pid: 301, tid: 301, comm: "chosen", start: 301, cgroup: v1System, affinity: "1-7"},
	{pid: self, tid: self, comm: "nri-cpupool", start: 999, cgroup: v1System, affinity: "0-7"},
}

// addThread writes a thread's stat (below its process and as /proc/<tid>,
// as the kernel shows every thread), its process's cgroup, and its
// affinity in the kernel.
func (n *node) addThread(t *testing.T, k *fakeKernel, th fakeThread) {
	t.Helper()
	line := fmt.Sprintf("%d (%s) S 0 0 0 0 -1 %d 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", th.tid, th.comm, th.flags, th.start)
	pdir := filepath.Join(n.proc, fmt.Sprint(th.pid))
	for _, f := range []string{filepath.Join(pdir, "task", fmt.Sprint(th.tid), "stat"), filepath.Join(n.proc, fmt.Sprint(th.tid), "stat")} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte(line), 0o644))
	}
	if th.pid == th.tid {
		require.NoError(t, os.WriteFile(filepath.Join(pdir, "cgroup"), []byte(th.cgroup+"\n"), 0o644))
	}
	a, err := cpulist.Parse(th.affinity)
	require.NoError(t, err)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.aff[th.tid] = a
}

// endThread removes a thread, as its exit does.
func (n *node) endThread(t *testing.T, k *fakeKernel, pid, tid int) {
	t.Helper()
	require.NoError(t, os.RemoveAll(filepath.Join(n.proc, fmt.Sprint(pid), "task", fmt.Sprint(tid))))
	if pid != tid {
		require.NoError(t, os.RemoveAll(filepath.Join(n.proc, fmt.Sprint(tid))))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.aff, tid)
}

// threadNode is a node with hostThreads; v1 makes its hierarchy cgroup
// v1's (no cgroup.controllers at the root).
func threadNode(t *testing.T, v1 bool) (*node, *fakeKernel) {
	t.Helper()
	n := newNode(t)
	k := &fakeKernel{aff: map[int]cpuset.CPUSet{}, refuse: map[int]error{13: syscall.EINVAL}}
	for _, th := range hostThreads {
		n.addThread(t, k, th)
	}
	if v1 {
		require.NoError(t, os.Remove(filepath.Join(n.cgroup, "cgroup.controllers")))
	}
	return n, k
}

// startThreads is a process whose FS serves thread affinities through k,
// below fsys (nil: the host's files).
func (n *node) startThreads(t *testing.T, k *fakeKernel, fsys *crashfs.FS) *process {
	t.Helper()
	if fsys == nil {
		fsys = &crashfs.FS{}
	}
	fsys.Inner = NewAffinityFS(hostfiles.OS{}, n.proc, k)
	p := n.start(t, fsys, 1)
	p.src.cfg.ThreadAffinity = true
	p.src.cfg.PodCgroups = func() []string { return []string{"custompods"} }
	p.r.RestoreOnlyUnder(filepath.Join(n.sysfs, "sys/devices/virtual/workqueue"), n.cgroup, AffinityRoot)
	return p
}

// booted are hostThreads' affinities as the node booted.
func booted() map[int]string {
	out := map[int]string{}
	for _, th := range hostThreads {
		out[th.tid] = th.affinity
	}
	return out
}

// affinitiesWith is booted with some threads changed.
func affinitiesWith(changes map[int]string) map[int]string {
	out := booted()
	for tid, a := range changes {
		out[tid] = a
	}
	return out
}

// TestThreadsConfinedOnV1: on cgroup v1, CPUs 6-7 held, every host
// thread outside the pods' tree, the plugin's own too, loses them, each from its
// own affinity, and the unbound kernel threads too; a per-CPU kernel
// thread, one pinned to a CPU, a container's process, a pod cgroup the
// runtime names and a process pinned to the kept CPUs
// are left alone; the kernel's refusal is counted and reported. Released,
// every affinity is exactly as before and the journal is empty.
func TestThreadsConfinedOnV1(t *testing.T) {
	n, k := threadNode(t, true)
	p := n.startThreads(t, k, nil)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, affinitiesWith(map[int]string{2: "0-5", 12: "0-5", 1: "0-5", 100: "0-5", 101: "1-5", 301: "1-5", self: "0-5"}), k.affinities())
	st := p.r.Status()
	require.Len(t, st.Failures, 1, "rcu_preempt, refused")
	assert.Equal(t, AffinityPath(13, 5), st.Failures[0].Path)
	assert.Contains(t, st.Failures[0].Error, "invalid argument")
	assert.Contains(t, st.Failures[0].Hint, "its cpuset (cgroup v1) does not include them")
	assert.Equal(t, uint64(1), st.PermanentErrors)
	assert.Equal(t, 8, st.Records[Owner], "the workqueue mask and 7 threads")
	assert.Equal(t, with(map[string]string{"wq": "3e"}), n.files(t), "cgroup v1: no cgroup file written")

	require.NoError(t, p.r.Flush())
	assert.Equal(t, uint64(1), p.r.Status().PermanentErrors, "a refusal is counted once")

	p.keep.set(cpuset.New(7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, affinitiesWith(map[int]string{2: "0-6", 12: "6", 1: "0-6", 100: "0-6", 101: "1-6", 301: "1-6", 300: "6", self: "0-6"}), k.affinities(), "widened from the originals")

	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, booted(), k.affinities(), "released: every affinity exactly as it was")
	assert.Equal(t, originals, n.files(t))
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestThreadIDReused: a confined thread ends and the kernel gives its id
// to a thread started later, with an affinity of its own: the record of
// the old one (its path names its start time) is dropped as gone, and
// the new one never gets the old one's original.
func TestThreadIDReused(t *testing.T) {
	n, k := threadNode(t, true)
	p := n.startThreads(t, k, nil)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	require.Equal(t, "1-5", k.affinities()[101])

	n.endThread(t, k, 100, 101)
	n.addThread(t, k, fakeThread{pid: 100, tid: 101, comm: "sshd new", start: 5000, cgroup: v1System, affinity: "0-3"})
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-3", k.affinities()[101], "its own affinity, within the set")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.NotContains(t, records, AffinityPath(101, 101), "the ended thread's record is dropped")

	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, affinitiesWith(map[int]string{101: "0-3"}), k.affinities(), "not the old thread's 1-7")
	records, _, _, err = hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Empty(t, records)

	// The path checks the start time in reads and writes alike.
	fsys := NewAffinityFS(hostfiles.OS{}, n.proc, k)
	_, err = fsys.ReadFile(AffinityPath(101, 101))
	assert.ErrorIs(t, err, syscall.ENOENT)
	assert.ErrorIs(t, fsys.WriteFile(AffinityPath(101, 101), []byte("0")), syscall.ENOENT)
	assert.Equal(t, "0-3", k.affinities()[101])
	assert.Equal(t, hostfiles.Gone, hostfiles.Classify(fsys.WriteFile(AffinityPath(4242, 1), []byte("0"))))
}

// TestInheritedNarrowWidened: a process forked while its parent was
// confined starts with exactly the host set; it is recorded as if it had
// every host CPU, so that it is widened when the CPUs are released, also
// when the set changed in between (it inherited the previous pass's). A
// process whose own affinity is narrower than the set keeps it.
func TestInheritedNarrowWidened(t *testing.T) {
	n, k := threadNode(t, true)
	p := n.startThreads(t, k, nil)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())

	n.addThread(t, k, fakeThread{pid: 500, tid: 500, comm: "cron child", start: 500, cgroup: v1System, affinity: "0-5"})
	n.addThread(t, k, fakeThread{pid: 501, tid: 501, comm: "taskset 0-4", start: 501, cgroup: v1System, affinity: "0-4"})
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-5", k.affinities()[500])

	// Forked with 0-5 just before CPU 5 was granted too.
	n.addThread(t, k, fakeThread{pid: 502, tid: 502, comm: "late child", start: 502, cgroup: v1System, affinity: "0-5"})
	p.keep.set(cpuset.New(5, 6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-4", k.affinities()[500])
	assert.Equal(t, "0-4", k.affinities()[502])
	assert.Equal(t, "0-4", k.affinities()[501])

	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, affinitiesWith(map[int]string{500: "0-7", 501: "0-4", 502: "0-7"}), k.affinities(),
		"the children widened to every CPU, the process with its own affinity as it chose")
}

// TestThreadsOnV2: on cgroup v2 the cgroups confine the host's
// processes, and their threads' affinities are narrowed (and recorded)
// too, since the cgroups' cpuset changes reset them (reset_test.go); the
// unbound kernel threads as on v1.
func TestThreadsOnV2(t *testing.T) {
	n, k := threadNode(t, false)
	p := n.startThreads(t, k, nil)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, threadLife[0].aff, k.affinities())
	assert.Equal(t, with(map[string]string{"wq": "3e", "system/cpuset.cpus": "0-5"}), n.files(t))
	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, booted(), k.affinities())
}

// TestNoThreadAffinity: without an FS that serves affinities, cgroup v1
// says that host processes are not confined, and nothing is changed.
func TestNoThreadAffinity(t *testing.T) {
	n, k := threadNode(t, true)
	p := n.start(t, hostfiles.OS{}, 1)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, booted(), k.affinities())
	assert.Contains(t, strings.Join(p.src.Problems(), "\n"), "host processes (cgroup v1) and unbound kernel threads are not confined")
}

// threadLife is a life of grants and releases on cgroup v1, with the
// affinities each step leaves.
var threadLife = []struct {
	held cpuset.CPUSet
	aff  map[int]string
}{
	{cpuset.New(6, 7), affinitiesWith(map[int]string{2: "0-5", 12: "0-5", 1: "0-5", 100: "0-5", 101: "1-5", 301: "1-5", self: "0-5"})},
	{cpuset.New(5, 6, 7), affinitiesWith(map[int]string{2: "0-4", 12: "0-4", 1: "0-4", 100: "0-4", 101: "1-4", 301: "1-4", self: "0-4"})},
	{cpuset.New(7), affinitiesWith(map[int]string{2: "0-6", 12: "6", 1: "0-6", 100: "0-6", 101: "1-6", 301: "1-6", 300: "6", self: "0-6"})},
	{cpuset.New(), booted()},
}

// TestThreadsKillAtEveryWrite kills the process at every mutating step
// (a journal write, an affinity or a file, just before and just after),
// then starts another on the same threads and journal: without the
// feature every affinity is exactly as it was; keeping what the dead one
// kept gives the affinities from the originals, and the originals once
// released.
func TestThreadsKillAtEveryWrite(t *testing.T) {
	live := func(t *testing.T, n *node, k *fakeKernel, fsys *crashfs.FS) int {
		p := n.startThreads(t, k, fsys)
		for i, step := range threadLife {
			p.keep.set(step.held)
			_ = p.r.Flush()
			if fsys.Crashed() {
				return i
			}
			require.Equal(t, step.aff, k.affinities(), "step %d", i)
		}
		return len(threadLife)
	}
	n, k := threadNode(t, true)
	clean := &crashfs.FS{}
	require.Equal(t, len(threadLife), live(t, n, k, clean))
	steps := clean.Mutations()
	require.Greater(t, steps, 20)

	for c := 1; c <= steps; c++ {
		for _, after := range []bool{false, true} {
			for _, recovery := range []string{"without the feature", "keeps the same CPUs"} {
				t.Run(fmt.Sprintf("write %d %s, %s", c, map[bool]string{false: "before", true: "after"}[after], recovery), func(t *testing.T) {
					n, k := threadNode(t, true)
					fsys := &crashfs.FS{CrashAt: c, After: after}
					died := live(t, n, k, fsys)
					require.True(t, fsys.Crashed())

					p := n.startThreads(t, k, nil)
					if recovery == "keeps the same CPUs" {
						p.keep.set(threadLife[died].held)
						require.NoError(t, p.r.Flush())
						assert.Equal(t, threadLife[died].aff, k.affinities(), "from the originals")
						p.keep.set(cpuset.New())
					}
					require.NoError(t, p.r.Flush())
					assert.Equal(t, booted(), k.affinities(), "every affinity exactly as it was")
					assert.Equal(t, originals, n.files(t))
					records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
					require.NoError(t, err)
					assert.Empty(t, records)
				})
			}
		}
	}
}
