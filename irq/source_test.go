package irq

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

const boot = "5b0a4c9e-1111-4b1e-8a7e-000000000001"

// twoNodes is an 8-CPU node with NUMA nodes 0-3 and 4-7 and a handful of
// IRQs of the kinds that matter.
func twoNodes() procfixture.Spec {
	all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	return procfixture.Spec{
		CPUs:   all,
		BootID: boot,
		IRQs: []procfixture.IRQ{
			{N: 0, Affinity: all, Node: -1, Description: "IO-APIC 2-edge timer"},
			{N: 24, Affinity: all, Node: 0, Description: "PCI-MSI 49152-edge virtio0-config"},
			{N: 25, Affinity: cpuset.New(2), Node: 0, Description: "PCI-MSI 49153-edge virtio0-input.0"},
			{N: 26, Affinity: cpuset.New(6), Node: 1, Description: "PCI-MSI 49154-edge virtio0-output.0"},
			{N: 27, Affinity: cpuset.New(3), Node: -1, Description: "PCI-MSI 49155-edge nvme0q1"},
			{N: 28, Affinity: cpuset.New(2, 3), Node: 0, Description: "PCI-MSI 524288-edge nvme0q2"},
		},
	}
}

// node is a fixture /proc and /sys with a reconciler over an IRQ Source.
type node struct {
	t     *testing.T
	proc  string
	sys   string
	fs    *kernelFS
	src   *Source
	r     *hostfiles.Reconciler
	hook  *logtest.Hook
	log   *logrus.Logger
	state string
}

func newNode(t *testing.T, spec procfixture.Spec, irqbalanceDir string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{t: t, proc: procfixture.Write(t, filepath.Join(dir, "proc"), spec), sys: filepath.Join(dir, "sysroot"),
		state: filepath.Join(dir, "state", "state.json")}
	require.NoError(t, os.MkdirAll(filepath.Join(n.sys, "sys/devices/system/cpu"), 0o755))
	n.fs = &kernelFS{refuse: map[string]syscall.Errno{}}
	n.log, n.hook = logtest.NewNullLogger()
	n.start(irqbalanceDir)
	return n
}

// start opens the journal and a reconciler: a new plugin process.
func (n *node) start(irqbalanceDir string) {
	j, _, err := hostfiles.OpenJournal(n.fs, hostfiles.JournalPath(n.state), boot)
	require.NoError(n.t, err)
	n.src = NewSource(Config{ProcRoot: n.proc, SysfsRoot: n.sys, IrqbalanceDir: irqbalanceDir, Online: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7),
		NodeCPUs: map[int]cpuset.CPUSet{0: cpuset.New(0, 1, 2, 3), 1: cpuset.New(4, 5, 6, 7)}}, n.log)
	n.r = hostfiles.NewReconciler(n.src.FS(n.fs), j, n.log, hostfiles.DefaultTiming, n.src)
	n.t.Cleanup(n.r.Close)
}

func (n *node) ban(cpus ...int) {
	n.t.Helper()
	n.src.SetBanned(cpuset.New(cpus...))
	require.NoError(n.t, n.r.Flush())
}

func (n *node) affinity(irq string) string {
	n.t.Helper()
	data, err := os.ReadFile(filepath.Join(n.proc, "irq", irq, "smp_affinity_list"))
	require.NoError(n.t, err)
	return strings.TrimSpace(string(data))
}

func (n *node) defaultAffinity() string {
	n.t.Helper()
	data, err := os.ReadFile(filepath.Join(n.proc, "irq", "default_smp_affinity"))
	require.NoError(n.t, err)
	return strings.TrimSpace(string(data))
}

func (n *node) setAffinity(irq, list string) {
	n.t.Helper()
	require.NoError(n.t, os.WriteFile(filepath.Join(n.proc, "irq", irq, "smp_affinity_list"), []byte(list+"\n"), 0o644))
}

// kernelFS is the real file system plus what the kernel refuses: writes to
// the listed files fail with their errno (a managed IRQ's EIO), and an
// optional event log sees every write in order.
type kernelFS struct {
	hostfiles.OS
	mu     sync.Mutex
	refuse map[string]syscall.Errno
	events *eventLog
}

func (k *kernelFS) WriteFile(path string, data []byte) error {
	k.mu.Lock()
	errno, refused := k.refuse[path]
	k.mu.Unlock()
	if k.events != nil {
		k.events.add("write " + path)
	}
	if refused {
		return &os.PathError{Op: "write", Path: path, Err: errno}
	}
	return k.OS.WriteFile(path, data)
}

func (k *kernelFS) managed(proc, irq string, errno syscall.Errno) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refuse[filepath.Join(proc, "irq", irq, "smp_affinity_list")] = errno
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// TestMoveOffAndRestore: every IRQ on a banned CPU moves off, keeping its
// other CPUs; an IRQ pinned only to banned CPUs goes to its node's free
// CPUs (or every free CPU when its node is unknown); IRQs already off are
// not touched; default_smp_affinity loses the CPUs in the kernel's width.
// Unbanned, everything is exactly as before.
func TestMoveOffAndRestore(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.ban(2, 3)
	assert.Equal(t, "0-1,4-7", n.affinity("24"))
	assert.Equal(t, "0-1", n.affinity("25"), "pinned to a banned CPU: its node's free CPUs")
	assert.Equal(t, "6", n.affinity("26"), "not on a banned CPU: untouched")
	assert.Equal(t, "0-1,4-7", n.affinity("27"), "no node: every free CPU")
	assert.Equal(t, "0-1", n.affinity("28"))
	assert.Equal(t, "f3", n.defaultAffinity())
	st := n.r.Status()
	assert.Equal(t, 6, st.Records[Owner], "timer, 24, 25, 27, 28 and the default; not 26")

	// Another CPU banned: computed from the originals, not from the
	// changed values.
	n.ban(3, 6)
	assert.Equal(t, "0-2,4-5,7", n.affinity("24"))
	assert.Equal(t, "2", n.affinity("25"), "back to its original, which avoids 3 and 6")
	assert.Equal(t, "4-5,7", n.affinity("26"))
	assert.Equal(t, "b7", n.defaultAffinity())

	n.ban()
	for irq, want := range map[string]string{"0": "0-7", "24": "0-7", "25": "2", "26": "6", "27": "3", "28": "2-3"} {
		assert.Equal(t, want, n.affinity(irq), "IRQ %s restored", irq)
	}
	assert.Equal(t, "ff", n.defaultAffinity())
	assert.Empty(t, n.r.Status().Records[Owner])
}

// TestSameAffinityOnOtherNodes: a pass works each distinct affinity out
// once, but an IRQ left with nothing of it gets its own node's free CPUs:
// the same original on node 0, on node 1 and on no node gives three
// answers; one that keeps CPUs gives one answer wherever its IRQ is.
func TestSameAffinityOnOtherNodes(t *testing.T) {
	spec := twoNodes()
	for i, node := range []int{0, 1, -1} {
		spec.IRQs = append(spec.IRQs, procfixture.IRQ{N: 40 + i, Affinity: cpuset.New(2), Node: node, Description: "PCI-MSI edge mlx5_comp" + strconv.Itoa(i)})
		spec.IRQs = append(spec.IRQs, procfixture.IRQ{N: 50 + i, Affinity: cpuset.New(2, 5), Node: node, Description: "PCI-MSI edge ice-" + strconv.Itoa(i)})
	}
	n := newNode(t, spec, "")
	n.ban(2, 3)
	assert.Equal(t, "0-1", n.affinity("40"), "node 0's free CPUs")
	assert.Equal(t, "4-7", n.affinity("41"), "node 1's free CPUs")
	assert.Equal(t, "0-1,4-7", n.affinity("42"), "no node: every free CPU")
	for _, irq := range []string{"50", "51", "52"} {
		assert.Equal(t, "5", n.affinity(irq), "IRQ %s keeps what is left of its original", irq)
	}
}

// TestManagedIRQsReportedNotRetried: the timer and a managed IRQ refuse
// the write (EIO); the others move, the refusals are logged once and
// reported with the hint.
func TestManagedIRQsReportedNotRetried(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.fs.managed(n.proc, "0", syscall.EIO)
	n.fs.managed(n.proc, "28", syscall.EPERM)
	n.ban(2, 3)
	n.ban(2, 3)
	assert.Equal(t, "0-1,4-7", n.affinity("24"))
	assert.Equal(t, "2-3", n.affinity("28"))
	st := n.r.Status()
	require.Len(t, st.Failures, 2)
	assert.Equal(t, filepath.Join(n.proc, "irq/0/smp_affinity_list"), st.Failures[0].Path)
	assert.Contains(t, st.Failures[0].Hint, "kernel-managed")
	var warned []string
	for _, e := range n.hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warned = append(warned, e.Message)
		}
	}
	require.Len(t, warned, 2, "one line per errno, once: %v", warned)
	n.ban()
	assert.Empty(t, n.r.Status().Failures)
	assert.Equal(t, "0-7", n.affinity("24"))
}

// TestLateIRQAndDrift: an IRQ requested after the ban (a driver loaded)
// and an IRQ put back on a banned CPU by another program are both moved
// by the next pass; the late one is restored to the value it came with.
//
// Its late IRQ 40 starts on every CPU, as one whose driver sets its own
// affinity does; one that starts on the narrowed default_smp_affinity, as
// the kernel gives most, is TestLateIRQStartedOnNarrowedDefaultIsRestored's.
func TestLateIRQAndDrift(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.ban(2, 3)
	spec := twoNodes()
	spec.IRQs = []procfixture.IRQ{{N: 40, Affinity: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), Node: 1, Description: "PCI-MSI 1-edge ice-vf0"}}
	procfixture.Write(t, n.proc, procfixture.Spec{CPUs: spec.CPUs, IRQs: spec.IRQs, DefaultAffinity: ptr(cpuset.New(0, 1, 4, 5, 6, 7))})
	n.setAffinity("24", "0-7")
	require.NoError(t, n.r.Flush())
	assert.Equal(t, "0-1,4-7", n.affinity("40"))
	assert.Equal(t, "0-1,4-7", n.affinity("24"))
	// irqbalance moving an IRQ within the allowed CPUs is fine.
	n.setAffinity("24", "5")
	require.NoError(t, n.r.Flush())
	assert.Equal(t, "5", n.affinity("24"))
	n.ban()
	assert.Equal(t, "0-7", n.affinity("40"))
	assert.Equal(t, "0-7", n.affinity("24"))
}

func ptr[T any](v T) *T { return &v }

// TestRestartRestoresWhatIsNoLongerWanted: a new process (after a crash)
// that bans other CPUs restores the IRQs only the old ban moved, from the
// journal, and computes the new ban from the originals.
func TestRestartRestoresWhatIsNoLongerWanted(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.ban(2, 3)
	n.r.Close()
	n.start("")
	n.ban(6)
	assert.Equal(t, "0-5,7", n.affinity("24"))
	assert.Equal(t, "2", n.affinity("25"))
	assert.Equal(t, "3", n.affinity("27"))
	assert.Equal(t, "4-5,7", n.affinity("26"))
	assert.Equal(t, "bf", n.defaultAffinity())
	n.ban()
	assert.Equal(t, "6", n.affinity("26"))
	assert.Equal(t, "ff", n.defaultAffinity())
}

// TestEveryCPUBanned: nothing is left to move IRQs to; they stay and the
// reason is reported.
func TestEveryCPUBanned(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.ban(0, 1, 2, 3, 4, 5, 6, 7)
	assert.Equal(t, "0-7", n.affinity("24"))
	st := n.r.Status()
	require.NotEmpty(t, st.Failures)
	assert.Contains(t, st.Failures[0].Error, "every online CPU")
}

// TestWideMask: on a 40-CPU node the default mask is two groups; it is
// written back in exactly that width.
func TestWideMask(t *testing.T) {
	all := cpuset.New()
	for i := range 40 {
		all = all.Union(cpuset.New(i))
	}
	dir := procfixture.Write(t, t.TempDir(), procfixture.Spec{CPUs: all, IRQs: []procfixture.IRQ{{N: 30, Affinity: all, Node: -1}}})
	require.Equal(t, "ff,ffffffff", strings.TrimSpace(read(t, filepath.Join(dir, "irq/default_smp_affinity"))))
	log, _ := logtest.NewNullLogger()
	j, _, err := hostfiles.OpenJournal(hostfiles.OS{}, filepath.Join(t.TempDir(), hostfiles.JournalFile), boot)
	require.NoError(t, err)
	src := NewSource(Config{ProcRoot: dir, Online: all}, log)
	r := hostfiles.NewReconciler(hostfiles.OS{}, j, log, hostfiles.DefaultTiming, src)
	src.SetBanned(cpuset.New(2, 3, 39))
	require.NoError(t, r.Flush())
	assert.Equal(t, "7f,fffffff3", strings.TrimSpace(read(t, filepath.Join(dir, "irq/default_smp_affinity"))))
	assert.Equal(t, "0-1,4-38", strings.TrimSpace(read(t, filepath.Join(dir, "irq/30/smp_affinity_list"))))
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// TestNoProcIrq: a /proc without irq (a container without it mounted) is
// a planning error, so nothing recorded is restored on its account.
func TestNoProcIrq(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.ban(2)
	require.NoError(t, os.Rename(filepath.Join(n.proc, "irq"), filepath.Join(n.proc, "irq.away")))
	n.src.SetBanned(cpuset.New(3))
	err := n.r.Flush()
	require.ErrorContains(t, err, "listing IRQs")
	require.NoError(t, os.Rename(filepath.Join(n.proc, "irq.away"), filepath.Join(n.proc, "irq")))
	assert.Equal(t, "0-1,3-7", n.affinity("24"), "left as it was")
}

// action gives IRQ n a handler of that name, as the kernel does with a
// directory in /proc/irq/<n>; "" removes its handlers.
func (n *node) action(irq int, name string) {
	n.t.Helper()
	dir := filepath.Join(n.proc, "irq", strconv.Itoa(irq))
	entries, err := os.ReadDir(dir)
	require.NoError(n.t, err)
	for _, e := range entries {
		if e.IsDir() {
			require.NoError(n.t, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	if name != "" {
		require.NoError(n.t, os.Mkdir(filepath.Join(dir, name), 0o755))
	}
}

// TestReusedIRQNotRestored: the plugin dies with IRQ 25 moved off CPU 2;
// while it is away the kernel frees IRQ 25 and gives the number to another
// device, with the default affinity. The next process leaves the new
// device's IRQ where it is rather than "restoring" the old device's
// affinity (CPU 2), and restores the others (issue 30). The identity is
// the IRQ's handler names (its directories in /proc/irq/25).
func TestReusedIRQNotRestored(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.action(25, "virtio0-input.0")
	n.action(24, "virtio0-config")
	n.ban(2, 3)
	assert.Equal(t, "0-1", n.affinity("25"))
	assert.Equal(t, "virtio0-input.0", n.src.Identity(filepath.Join(n.proc, "irq/25/smp_affinity_list")))
	assert.Empty(t, n.src.Identity(filepath.Join(n.proc, "irq/default_smp_affinity")))
	n.r.Close()

	n.action(25, "nvme1q4")
	require.NoError(t, os.WriteFile(filepath.Join(n.proc, "irq/25/smp_affinity_list"), []byte("0-7\n"), 0o644))
	n.start("")
	n.ban()
	assert.Equal(t, "0-7", n.affinity("25"), "the new device's IRQ stays where the kernel put it")
	assert.Equal(t, "0-7", n.affinity("24"), "restored")
	assert.Equal(t, "3", n.affinity("27"), "restored (no handler named: unknown, not another device)")
	assert.Equal(t, "ff", n.defaultAffinity())
	assert.Empty(t, n.r.Status().Records[Owner])
	var said bool
	for _, e := range n.hook.AllEntries() {
		said = said || strings.Contains(e.Message, "now belongs to nvme1q4, not virtio0-input.0")
	}
	assert.True(t, said, "the dropped original is logged")
}

// TestLateIRQStartedOnNarrowedDefaultIsRestored: the
// kernel gives an IRQ requested later (a driver loaded, a VF created) the
// affinity default_smp_affinity has then (irq_setup_affinity: the
// default ∩ the online CPUs, narrowed to the device's node when that
// leaves any), which the plugin has narrowed. The IRQ avoids the banned
// CPUs, and was never recorded: when the ban ended it kept the plugin's
// narrowed set for good, although default_smp_affinity was restored. It
// now takes as its original what the default's original would have given
// it. An IRQ that was there before the ban on such a set (irqbalance put
// it there) keeps its own.
func TestLateIRQStartedOnNarrowedDefaultIsRestored(t *testing.T) {
	spec := twoNodes()
	spec.IRQs = append(spec.IRQs, procfixture.IRQ{N: 29, Affinity: cpuset.New(0, 1), Node: 0, Description: "PCI-MSI 524289-edge nvme0q3"})
	n := newNode(t, spec, "")
	n.ban(2, 3)
	require.Equal(t, "f3", n.defaultAffinity())
	// Requested now: the kernel starts IRQ 40 (no node) on
	// default_smp_affinity (f3), and IRQ 41 (node 0) on its node's part.
	late := []procfixture.IRQ{
		{N: 40, Affinity: cpuset.New(0, 1, 4, 5, 6, 7), Node: -1, Description: "PCI-MSI 1-edge ice-vf0"},
		{N: 41, Affinity: cpuset.New(0, 1), Node: 0, Description: "PCI-MSI 2-edge ice-vf1"},
		{N: 42, Affinity: cpuset.New(4, 5, 6, 7), Node: 1, Description: "PCI-MSI 3-edge ice-vf2"},
	}
	procfixture.Write(t, n.proc, procfixture.Spec{CPUs: spec.CPUs, IRQs: late, DefaultAffinity: ptr(cpuset.New(0, 1, 4, 5, 6, 7))})
	require.NoError(t, n.r.Flush())
	assert.Equal(t, "0-1,4-7", n.affinity("40"))
	assert.Equal(t, "0-1", n.affinity("41"))
	n.ban()
	assert.Equal(t, "ff", n.defaultAffinity())
	assert.Equal(t, "0-7", n.affinity("40"), "the affinity the IRQ would have had without the plugin's default_smp_affinity")
	assert.Equal(t, "0-3", n.affinity("41"), "its node's part of the default's original")
	assert.Equal(t, "4-7", n.affinity("42"), "nothing of its node was banned")
	assert.Equal(t, "0-1", n.affinity("29"), "there before the ban: its own value")
}

// TestDefaultGetsAReleasedCPUBackWhileAnotherStaysBanned: CPUs 2 and 3
// are banned, then 2 is released while 3 stays banned. default_smp_affinity,
// narrowed to f3, still avoids 3, yet it is the plugin's own write for a
// want that changed: it becomes f7, its original less 3. Left at f3, IRQs
// requested from then on started without CPU 2 and, not matching the
// narrowed default the plugin computes, took that as their own original,
// which they kept for good after the release.
func TestDefaultGetsAReleasedCPUBackWhileAnotherStaysBanned(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, "")
	n.ban(2, 3)
	require.Equal(t, "f3", n.defaultAffinity())
	n.ban(3)
	assert.Equal(t, "f7", n.defaultAffinity(), "CPU 2 is released: new IRQs may start there again")
	// Requested now: the kernel starts IRQ 40 (no node) on the default as
	// it is.
	started, err := ParseMask(n.defaultAffinity())
	require.NoError(t, err)
	late := []procfixture.IRQ{{N: 40, Affinity: started, Node: -1, Description: "PCI-MSI 1-edge ice-vf0"}}
	procfixture.Write(t, n.proc, procfixture.Spec{CPUs: spec.CPUs, IRQs: late, DefaultAffinity: &started})
	require.NoError(t, n.r.Flush())
	n.ban()
	assert.Equal(t, "ff", n.defaultAffinity())
	assert.Equal(t, "0-7", n.affinity("40"), "the affinity the IRQ would have had without the plugin's default_smp_affinity")
}

// TestReloadedDriverIRQGetsTheDefaultsOriginal: a driver unbound and
// bound again while CPUs are kept (modprobe -r/modprobe, a VF re-created)
// gets its IRQ numbers back (irq_domain_alloc_descs' hint is derived from
// the hwirq), so the "new" IRQ is in inheritance.before and takes no
// inferred original: it starts on the narrowed default's node part (0-1),
// avoids the banned CPUs, got no record, and kept 0-1 for good after
// the release although default_smp_affinity went back to ff. A listing
// that no longer has a number now drops it from those there before.
func TestReloadedDriverIRQGetsTheDefaultsOriginal(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, "")
	n.ban(2, 3)
	require.Equal(t, "0-1,4-7", n.affinity("24"))
	// Unbound: the IRQ goes; a pass sees its record's file gone.
	require.NoError(t, os.RemoveAll(filepath.Join(n.proc, "irq", "24")))
	require.NoError(t, n.r.Flush())
	// Bound again: the same number, started by the kernel on the narrowed
	// default's part on node 0.
	procfixture.Write(t, n.proc, procfixture.Spec{CPUs: spec.CPUs, IRQs: []procfixture.IRQ{
		{N: 24, Affinity: cpuset.New(0, 1), Node: 0, Description: "PCI-MSI 49152-edge virtio0-config"}},
		DefaultAffinity: ptr(cpuset.New(0, 1, 4, 5, 6, 7))})
	require.NoError(t, n.r.Flush())
	n.ban()
	assert.Equal(t, "ff", n.defaultAffinity())
	assert.Equal(t, "0-3", n.affinity("24"), "what the kernel gives it from the default's original, as for a new number")
}
