package irq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// irqbalanceRecords are the journal's records of what the plugin told
// irqbalance.
func irqbalanceRecords(t *testing.T, n *node) map[string]hostfiles.Record {
	t.Helper()
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	out := map[string]hostfiles.Record{}
	for path, r := range records {
		if path == IrqbalancePath {
			out[path] = r
		}
	}
	return out
}

// startLeaving opens the journal and a reconciler of a new process that
// tells irqbalance nothing new (irq.irqbalance: off, or irqIsolation off
// and restore-host, which make an IRQ Source only for the journal's
// records).
func (n *node) startLeaving(irqbalanceDir string) {
	j, _, err := hostfiles.OpenJournal(n.fs, hostfiles.JournalPath(n.state), boot)
	require.NoError(n.t, err)
	n.src = NewSource(Config{ProcRoot: n.proc, SysfsRoot: n.sys, IrqbalanceDir: irqbalanceDir, LeaveIrqbalance: true,
		Online: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)}, n.log)
	n.r = hostfiles.NewReconciler(n.src.FS(n.fs), j, n.log, hostfiles.DefaultTiming, n.src)
	n.t.Cleanup(n.r.Close)
}

// TestIrqbalanceBanJournaledUntilReleased: the CPUs the
// plugin tells irqbalance to ban are host state the plugin changed, but
// the journal never recorded them. The release pass restored every IRQ
// and dropped their records before its After hook told irqbalance NULL;
// when that failed for now (irqbalance busy) and the process was killed
// before the retry, the journal held no IRQ record, and the next process
// with irqIsolation off, or restore-host (whose config has every feature
// off), made no IRQ Source at all (plugin/isolation.go openIsolation:
// IRQIsolationEnabled() || hasOwner(j, irq.Owner)), so nothing ever sent
// "settings cpus NULL": irqbalance kept the released CPUs banned until
// it restarted. The ban is now a journal record (IrqbalancePath),
// recorded before it is told, restored after the IRQs, kept until
// irqbalance took it back.
func TestIrqbalanceBanJournaledUntilReleased(t *testing.T) {
	skipUnlessRoot(t)
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(4242, "PATH=/usr/bin", "IRQBALANCE_BANNED_CPULIST=7")}
	sockets := filepath.Join(t.TempDir(), "run-irqbalance")
	events := &eventLog{}
	fake := startFakeIrqbalance(t, sockets, 4242, cpuset.New(7), events)
	n := newNode(t, spec, sockets)

	n.ban(2, 3)
	fake.mu.Lock()
	require.Equal(t, "2-3,7", fake.fromUI)
	fake.mu.Unlock()
	assert.Equal(t, "7", irqbalanceRecords(t, n)[IrqbalancePath].Original, "recorded: what it banned by itself")

	// irqbalance does not answer for a moment (the socket is there,
	// nothing accepts): the release's NULL fails, the IRQs are restored.
	fake.ln.SetUnlinkOnClose(false)
	require.NoError(t, fake.ln.Close())
	n.src.SetBanned(cpuset.New())
	require.Error(t, n.r.Flush())
	assert.Equal(t, "0-7", n.affinity("24"), "restored")
	n.r.Close() // kill -9 before the retry

	fake.mu.Lock()
	still := fake.fromUI
	fake.mu.Unlock()
	assert.Equal(t, "2-3,7", still, "irqbalance still bans the released CPUs 2-3")
	assert.Len(t, irqbalanceRecords(t, n), 1, "the journal keeps what the plugin told irqbalance until it took its own set back")

	// irqbalance answers again (the same process); a next process that
	// tells it nothing new gives it its own set back.
	require.NoError(t, os.Remove(filepath.Join(sockets, "irqbalance4242.sock")))
	again := startFakeIrqbalance(t, sockets, 4242, cpuset.New(7), events)
	again.mu.Lock()
	again.fromUI = "2-3,7"
	again.mu.Unlock()
	events.take()
	n.startLeaving(sockets)
	require.NoError(t, n.r.Flush())
	assert.Equal(t, []string{"irqbalance: settings cpus NULL"}, events.take())
	again.mu.Lock()
	assert.Empty(t, again.fromUI, "its own set back")
	again.mu.Unlock()
	assert.Empty(t, irqbalanceRecords(t, n))
}

// TestIrqbalanceRestartedDropsTheRecord: a record of what an irqbalance
// that has since restarted was told is dropped, not told to the new
// process, which computed its own set anew.
func TestIrqbalanceRestartedDropsTheRecord(t *testing.T) {
	skipUnlessRoot(t)
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(100, "IRQBALANCE_BANNED_CPULIST=7")}
	sockets := filepath.Join(t.TempDir(), "run-irqbalance")
	events := &eventLog{}
	first := startFakeIrqbalance(t, sockets, 100, cpuset.New(7), events)
	n := newNode(t, spec, sockets)
	n.ban(2)
	assert.Equal(t, "irqbalance100", irqbalanceRecords(t, n)[IrqbalancePath].Identity)
	n.r.Close()

	first.ln.Close()
	require.NoError(t, os.RemoveAll(filepath.Join(n.proc, "100")))
	procfixture.Write(t, n.proc, procfixture.Spec{CPUs: spec.CPUs, Processes: []procfixture.Process{irqbalanceProc(200, "IRQBALANCE_BANNED_CPULIST=5")}})
	startFakeIrqbalance(t, sockets, 200, cpuset.New(5), events)
	events.take()
	n.startLeaving(sockets)
	require.NoError(t, n.r.Flush())
	assert.Empty(t, events.take(), "nothing told to the new irqbalance")
	assert.Empty(t, irqbalanceRecords(t, n))
}

// TestIrqbalanceEarlierSocketBanGivenBack: an irqbalance
// told a ban through its socket before the plugin (an operator's
// irqbalance-ui, another agent: "settings cpus 5") has that ban; the
// plugin computed irqbalance's own set from its environment only, sent
// its own plus the banned CPUs (dropping 5 while the ban lasted) and NULL
// at the end: CPU 5's ban was lost for good. irqbalance is now asked
// ("setup") before it is first told anything, and gets that set back.
func TestIrqbalanceEarlierSocketBanGivenBack(t *testing.T) {
	skipUnlessRoot(t)
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(4242, "PATH=/usr/bin")}
	sockets := filepath.Join(t.TempDir(), "run-irqbalance")
	events := &eventLog{}
	fake := startFakeIrqbalance(t, sockets, 4242, cpuset.New(), events)
	fake.mu.Lock()
	fake.fromUI = "5" // set before the plugin ran
	fake.mu.Unlock()
	n := newNode(t, spec, sockets)
	n.ban(2)
	fake.mu.Lock()
	during := fake.fromUI
	fake.mu.Unlock()
	assert.Contains(t, []string{"2,5"}, during, "CPU 5 stays banned while the plugin bans 2")
	n.ban()
	fake.mu.Lock()
	defer fake.mu.Unlock()
	assert.Equal(t, "5", fake.fromUI, "irqbalance has exactly the ban it had")
}

// TestIrqbalanceUnreadableAnswerTakesItsEnvironment: an answer to
// "setup" without BANNED leaves the set irqbalance computes by itself,
// from its environment, as what it bans: a ban set through its socket
// before is not given back, and the log says so once.
func TestIrqbalanceUnreadableAnswerTakesItsEnvironment(t *testing.T) {
	skipUnlessRoot(t)
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(4242, "IRQBALANCE_BANNED_CPULIST=7")}
	sockets := filepath.Join(t.TempDir(), "run-irqbalance")
	events := &eventLog{}
	fake := startFakeIrqbalance(t, sockets, 4242, cpuset.New(7), events)
	fake.mu.Lock()
	fake.fromUI, fake.garbled = "5", true
	fake.mu.Unlock()
	n := newNode(t, spec, sockets)
	n.ban(2)
	n.ban(2, 3)
	assert.Equal(t, []string{"irqbalance: setup", "irqbalance: settings cpus 2,7", "irqbalance: settings cpus 2-3,7"}, events.take())
	n.ban()
	assert.Equal(t, []string{"irqbalance: settings cpus NULL"}, events.take())
	var warned []string
	for _, e := range n.hook.AllEntries() {
		if strings.Contains(e.Message, "is not given back") {
			warned = append(warned, e.Message)
		}
	}
	assert.Len(t, warned, 1)
}
