package irq

import (
	"errors"
	"net"
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
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// fakeIrqbalance speaks irqbalance 1.9's control protocol on
// <dir>/irqbalance<pid>.sock: one message per connection, accepted only
// with SCM_CREDENTIALS of root; "settings cpus <list|NULL>" sets the
// banned CPUs from the UI, "setup" answers "SLEEP 10 BANNED <mask>".
type fakeIrqbalance struct {
	ln     *net.UnixListener
	events *eventLog
	mu     sync.Mutex
	fromUI string // "" when unset (NULL)
	own    cpuset.CPUSet
	// garbled: "setup" is answered without BANNED.
	garbled bool
}

func startFakeIrqbalance(t *testing.T, dir string, pid int, own cpuset.CPUSet, events *eventLog) *fakeIrqbalance {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "irqbalance"+strconv.Itoa(pid)+".sock"), Net: "unix"})
	require.NoError(t, err)
	raw, err := ln.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, raw.Control(func(fd uintptr) {
		require.NoError(t, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1))
	}))
	f := &fakeIrqbalance{ln: ln, events: events, own: own}
	t.Cleanup(func() { ln.Close() })
	go f.serve()
	return f
}

func (f *fakeIrqbalance) serve() {
	for {
		conn, err := f.ln.AcceptUnix()
		if err != nil {
			return
		}
		f.handle(conn)
	}
}

func (f *fakeIrqbalance) handle(conn *net.UnixConn) {
	defer conn.Close()
	buf, oob := make([]byte, 500), make([]byte, 128)
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) == 0 {
		f.events.add("irqbalance: refused, no credentials")
		return
	}
	cred, err := unix.ParseUnixCredentials(&msgs[0])
	if err != nil || cred.Uid != 0 {
		f.events.add("irqbalance: refused, not root")
		return
	}
	msg := string(buf[:n])
	f.events.add("irqbalance: " + msg)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case strings.HasPrefix(msg, "settings cpus "):
		f.fromUI = strings.TrimPrefix(msg, "settings cpus ")
		if strings.HasPrefix(f.fromUI, "NULL") {
			f.fromUI = ""
		}
	case msg == "setup" && f.garbled:
		conn.Write([]byte("SLEEP 10 "))
	case msg == "setup":
		banned := f.own
		if f.fromUI != "" {
			banned, _ = cpuParse(f.fromUI)
		}
		conn.Write([]byte("SLEEP 10 BANNED " + procfixture.Mask(banned, 8)))
	}
}

func cpuParse(s string) (cpuset.CPUSet, error) { return cpuset.Parse(s) }

func irqbalanceProc(pid int, env ...string) procfixture.Process {
	return procfixture.Process{PID: pid, Comm: "irqbalance", Environ: env, AllowedCPUs: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)}
}

func skipUnlessRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("irqbalance accepts commands from root only")
	}
}

// TestIrqbalanceToldBeforeWritesAndReleasedAfter: with irqbalance running,
// its banned CPUs become the set it bans (asked: here its own,
// IRQBALANCE_BANNED_CPULIST=7) plus the banned ones, through the socket
// and before any IRQ is written;
// when nothing is banned any more, NULL gives it its own set back, after
// the restores. Nothing is sent twice to the same process.
func TestIrqbalanceToldBeforeWritesAndReleasedAfter(t *testing.T) {
	skipUnlessRoot(t)
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(4242, "PATH=/usr/bin", "IRQBALANCE_BANNED_CPULIST=7")}
	sockets := filepath.Join(t.TempDir(), "run-irqbalance")
	events := &eventLog{}
	fake := startFakeIrqbalance(t, sockets, 4242, cpuset.New(7), events)
	n := newNode(t, spec, sockets)
	n.fs.events = events

	n.ban(2, 3)
	got := events.take()
	require.NotEmpty(t, got)
	require.GreaterOrEqual(t, len(got), 2)
	assert.Equal(t, []string{"irqbalance: setup", "irqbalance: settings cpus 2-3,7"}, got[:2], "asked, then told, first: %v", got)
	assert.Contains(t, got, "write "+filepath.Join(n.proc, "irq/24/smp_affinity_list"))
	pid, banned, err := QueryBanned(n.proc, sockets)
	require.NoError(t, err)
	assert.Equal(t, 4242, pid)
	assert.Equal(t, "2-3,7", banned.String())
	events.take()

	n.ban(2, 3)
	assert.NotContains(t, events.take(), "irqbalance: settings cpus 2-3,7", "not sent again")

	n.ban()
	got = events.take()
	require.NotEmpty(t, got)
	assert.Equal(t, "irqbalance: settings cpus NULL", got[len(got)-1], "released last: %v", got)
	fake.mu.Lock()
	assert.Empty(t, fake.fromUI)
	fake.mu.Unlock()
	assert.Equal(t, IrqbalanceStatus{PID: 4242, Socket: filepath.Join(sockets, "irqbalance4242.sock"), Told: "NULL"}, n.src.Irqbalance())
}

// TestIrqbalanceOwnSetFromTheKernel: without the environment variables,
// irqbalance bans the kernel's isolated and nohz_full CPUs; the list sent
// keeps them. A restarted irqbalance (a new pid) is told again.
func TestIrqbalanceOwnSetFromTheKernel(t *testing.T) {
	skipUnlessRoot(t)
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(100)}
	sockets := filepath.Join(t.TempDir(), "run-irqbalance")
	events := &eventLog{}
	first := startFakeIrqbalance(t, sockets, 100, cpuset.New(6), events)
	n := newNode(t, spec, sockets)
	cpuDir := filepath.Join(n.sys, "sys/devices/system/cpu")
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "isolated"), []byte("6\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "nohz_full"), []byte("(null)\n"), 0o644))
	n.ban(2)
	assert.Contains(t, events.take(), "irqbalance: settings cpus 2,6")

	// irqbalance restarts: the old socket goes, a new one appears.
	first.ln.Close()
	require.NoError(t, os.RemoveAll(filepath.Join(n.proc, "100")))
	spec = procfixture.Spec{CPUs: spec.CPUs, Processes: []procfixture.Process{irqbalanceProc(200, "IRQBALANCE_BANNED_CPUS=00000010")}}
	procfixture.Write(t, n.proc, spec)
	startFakeIrqbalance(t, sockets, 200, cpuset.New(4), events)
	n.ban(2)
	assert.Contains(t, events.take(), "irqbalance: settings cpus 2,4", "the hex variable wins, as in irqbalance")
}

// TestIrqbalanceWithoutSocket: an irqbalance without its socket gets one
// warning; the writes happen anyway.
func TestIrqbalanceWithoutSocket(t *testing.T) {
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(77)}
	n := newNode(t, spec, filepath.Join(t.TempDir(), "no-such-dir"))
	n.ban(2)
	n.ban(2, 3)
	var warned []string
	for _, e := range n.hook.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, "without a control socket") {
			warned = append(warned, e.Message)
		}
	}
	assert.Len(t, warned, 1)
	assert.Equal(t, "0-1,4-7", n.affinity("24"))
	assert.Equal(t, 77, n.src.Irqbalance().WithoutSocket)
}

// TestIrqbalanceUnreachableIsRetried: a socket that refuses the
// connection (irqbalance died, the file stayed) fails the pass, which is
// retried; the IRQs are still written.
func TestIrqbalanceUnreachableIsRetried(t *testing.T) {
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(55)}
	sockets := t.TempDir()
	// A stale socket file: nothing listens.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(sockets, "irqbalance55.sock"), Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	ln.Close()
	n := newNode(t, spec, sockets)
	n.src.SetBanned(cpuset.New(2))
	err = n.r.Flush()
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v", err)
	assert.Equal(t, "0-1,3-7", n.affinity("24"))
}

// TestCommandTooLong: irqbalance reads 500 bytes; a longer list is an
// error rather than a truncated ban.
func TestCommandTooLong(t *testing.T) {
	_, err := command("/nonexistent", "settings cpus "+strings.Repeat("1,", 300), false)
	assert.ErrorContains(t, err, "at most 500")
}

// everyOther is a large node's fragmented banned set: CPUs 0, 2, ...,
// 4094 of 4096 (its list is 9,7 kB).
func everyOther() cpuset.CPUSet {
	var even []int
	for c := 0; c < 4096; c += 2 {
		even = append(even, c)
	}
	return cpuset.New(even...)
}

// TestFitBanList: a list that fits is sent as it is, in ranges; one that
// does not becomes the smallest superset that fits, by banning the CPUs
// of the shortest gaps first, never a subset (issue 30: a fragmented set
// on a large node was never told to irqbalance).
func TestFitBanList(t *testing.T) {
	list, extra := fitBanList(cpuset.New(2, 3, 4, 7, 9))
	assert.Equal(t, "2-4,7,9", list)
	assert.Zero(t, extra)

	want := everyOther()
	list, extra = fitBanList(want)
	assert.LessOrEqual(t, len(setCPUs+list), maxMessage)
	got, err := cpuset.Parse(list)
	require.NoError(t, err)
	assert.True(t, want.IsSubsetOf(got), "every CPU kept free of IRQs is banned")
	assert.Equal(t, got.Size()-want.Size(), extra)
	// Each open gap costs about 10 bytes ("a-b,"): some 48 stay open.
	assert.Less(t, extra, 2048-40, "as few CPUs added as fit")
	t.Logf("%d CPUs banned, %d of them added: %s", got.Size(), extra, list)

	// The shortest gaps close first: one long gap stays open.
	wide := everyOther().Difference(cpuset.New(1000, 1002, 1004, 1006, 1008))
	list, _ = fitBanList(wide)
	got, err = cpuset.Parse(list)
	require.NoError(t, err)
	assert.False(t, got.Contains(1003), "the 9-CPU gap 999-1009 stays open")
}

// TestIrqbalanceToldLargeFragmentedSet: on a 4096-CPU node with every
// other CPU kept free of IRQs, irqbalance is told a list that fits in the
// 500 bytes it reads, banning every kept CPU, and the pass succeeds; the
// log warns of the CPUs banned beyond them.
func TestIrqbalanceToldLargeFragmentedSet(t *testing.T) {
	skipUnlessRoot(t)
	dir := t.TempDir()
	proc, sockets := filepath.Join(dir, "proc"), filepath.Join(dir, "run-irqbalance")
	procfixture.Write(t, proc, procfixture.Spec{CPUs: cpuset.New(0, 1), Processes: []procfixture.Process{irqbalanceProc(4242, "PATH=/usr/bin")}})
	events := &eventLog{}
	fake := startFakeIrqbalance(t, sockets, 4242, cpuset.New(), events)
	log, hook := logtest.NewNullLogger()
	b := newIrqbalance(Config{ProcRoot: proc, SysfsRoot: filepath.Join(dir, "sysroot"), IrqbalanceDir: sockets}, log)

	want := everyOther()
	require.NoError(t, b.write([]byte(want.String())))
	got := events.take()
	require.Len(t, got, 1)
	assert.LessOrEqual(t, len(strings.TrimPrefix(got[0], "irqbalance: ")), maxMessage)
	fake.mu.Lock()
	told, err := cpuset.Parse(fake.fromUI)
	fake.mu.Unlock()
	require.NoError(t, err, "irqbalance read the whole list")
	assert.True(t, want.IsSubsetOf(told))
	assert.Equal(t, told.String(), b.status().Told)
	require.NotNil(t, hook.LastEntry())
	assert.Equal(t, logrus.WarnLevel, hook.LastEntry().Level)
	assert.Contains(t, hook.LastEntry().Message, "CPUs between them are banned too")

	require.NoError(t, b.write([]byte(want.String())))
	assert.Empty(t, events.take(), "not sent again")
}

// TestIrqbalanceOwnSetAsked: when its environment cannot be read (a
// plugin confined by systemd), irqbalance is asked for its own set before
// it is told anything.
func TestIrqbalanceOwnSetAsked(t *testing.T) {
	skipUnlessRoot(t)
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(300)}
	sockets := filepath.Join(t.TempDir(), "run-irqbalance")
	events := &eventLog{}
	startFakeIrqbalance(t, sockets, 300, cpuset.New(5, 7), events)
	n := newNode(t, spec, sockets)
	require.NoError(t, os.Remove(filepath.Join(n.proc, "300", "environ")))
	n.ban(2)
	got := events.take()
	require.GreaterOrEqual(t, len(got), 2)
	assert.Equal(t, []string{"irqbalance: setup", "irqbalance: settings cpus 2,5,7"}, got[:2])
	n.ban(2, 3)
	assert.Equal(t, "irqbalance: settings cpus 2-3,5,7", events.take()[0], "asked once")
}

// irqbalanceBannedMask is what irqbalance 1.9's "setup" puts after
// BANNED: cpumask_scnprintf(banned, 512, banned_cpus) with NR_CPUS 4096
// (cpumask.h), i.e. bitmap_scnprintf (bitmap.c): 32-bit groups of 8 hex
// digits, highest first, leading zero groups skipped, cut at 511 bytes.
func irqbalanceBannedMask(set cpuset.CPUSet) string {
	var b strings.Builder
	first := true
	for i := 4096 - 32; i >= 0; i -= 32 {
		var val uint32
		for _, c := range set.List() {
			if c >= i && c < i+32 {
				val |= 1 << (c - i)
			}
		}
		if val != 0 || !first || i == 0 {
			if !first {
				b.WriteString(",")
			}
			b.WriteString(strconv.FormatUint(uint64(val)|1<<32, 16)[1:])
			first = false
		}
	}
	s := b.String()
	if len(s) > 511 {
		s = s[:511]
	}
	return s
}

// TestSetupBannedCutMaskIsNotReadAsAnotherSet: 1,024 CPUs
// parse exactly; a ban whose highest CPU is 1792-1823 makes irqbalance
// cut its answer at 511 bytes mid-group: the plugin read a wrong set (CPU
// 4 read as CPU 0) without an error, recorded it as irqbalance's
// original and gave it back as a list at the release (CPU 0 banned for
// good, CPU 4 unbanned). Now it is an error: the environment's set is
// taken instead (read).
func TestSetupBannedCutMaskIsNotReadAsAnotherSet(t *testing.T) {
	all := make([]int, 1024)
	for i := range all {
		all[i] = i
	}
	for _, set := range []cpuset.CPUSet{cpuset.New(all...), cpuset.New(1023), cpuset.New(0, 33, 511, 1000)} {
		got, err := parseSetup("SLEEP 10 IRQ 5 LOAD 0 DIFF 0 CLASS 0 BANNED " + irqbalanceBannedMask(set))
		require.NoError(t, err)
		assert.True(t, set.Equals(got), "%s", set)
	}
	set := cpuset.New(4, 1800)
	got, err := parseSetup("SLEEP 10 BANNED " + irqbalanceBannedMask(set))
	if err == nil {
		assert.Equal(t, set.String(), got.String(), "a cut answer must not be read as another set")
	}
	_, err = parseSetup("SLEEP 10 BANNED 1,0000001")
	assert.Error(t, err, "a group short of 8 digits")
}
