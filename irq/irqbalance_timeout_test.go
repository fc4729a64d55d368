package irq

// A command irqbalance applies after the plugin's deadline: the plugin
// must not trust its caches of what irqbalance bans.

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// slowIrqbalance is irqbalance 1.9 whose main loop is busy: it handles a
// command (the ban takes effect) but closes the connection only after
// stall, past the plugin's 2 s deadline. Real irqbalance does the same
// when it accepts a queued connection late: the data the client sent
// before it gave up is still read and applied.
type slowIrqbalance struct {
	ln     *net.UnixListener
	mu     sync.Mutex
	fromUI string
	own    cpuset.CPUSet
	stall  time.Duration
	seen   []string
}

func startSlowIrqbalance(t *testing.T, dir string, pid int, own cpuset.CPUSet) *slowIrqbalance {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "irqbalance"+strconv.Itoa(pid)+".sock"), Net: "unix"})
	require.NoError(t, err)
	raw, err := ln.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, raw.Control(func(fd uintptr) {
		require.NoError(t, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1))
	}))
	f := &slowIrqbalance{ln: ln, own: own}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			f.handle(conn)
		}
	}()
	return f
}

func (f *slowIrqbalance) handle(conn *net.UnixConn) {
	defer conn.Close()
	buf, oob := make([]byte, 500), make([]byte, 128)
	n, _, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	msg := string(buf[:n])
	f.mu.Lock()
	f.seen = append(f.seen, msg)
	switch {
	case strings.HasPrefix(msg, "settings cpus "):
		f.fromUI = strings.TrimPrefix(msg, "settings cpus ")
		if strings.HasPrefix(f.fromUI, "NULL") {
			f.fromUI = ""
		}
	case msg == "setup":
		banned := f.own
		if f.fromUI != "" {
			banned, _ = cpuset.Parse(f.fromUI)
		}
		conn.Write([]byte("SLEEP 10 BANNED " + procfixture.Mask(banned, 8)))
	}
	stall := f.stall
	f.mu.Unlock()
	time.Sleep(stall)
}

func (f *slowIrqbalance) state() (string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := f.seen
	f.seen = nil
	return f.fromUI, seen
}

// TestIrqbalanceLateReleaseThenRebanIsSent: the release's "settings cpus NULL"
// reaches irqbalance, which applies it, but answers (closes) after the
// plugin's 2 s deadline: the pass fails for now and the record stays.
// A container is then granted the same CPUs before the retry. The
// plugin's caches (irqbalance.held, read back as IrqbalancePath, and
// st.Told) still say irqbalance bans 2,7, so the ban is never sent
// again, not even by a rescan (Flush is a full pass): irqbalance keeps
// placing IRQs on the exclusive CPU 2 and nothing reports it.
func TestIrqbalanceLateReleaseThenRebanIsSent(t *testing.T) {
	skipUnlessRoot(t)
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(4242, "IRQBALANCE_BANNED_CPULIST=7")}
	sockets := filepath.Join(t.TempDir(), "run-irqbalance")
	fake := startSlowIrqbalance(t, sockets, 4242, cpuset.New(7))
	n := newNode(t, spec, sockets)

	n.ban(2)
	ui, _ := fake.state()
	require.Equal(t, "2,7", ui)

	fake.mu.Lock()
	fake.stall = 2500 * time.Millisecond
	fake.mu.Unlock()
	n.src.SetBanned(cpuset.New())
	require.Error(t, n.r.Flush(), "the NULL timed out")
	time.Sleep(time.Second) // irqbalance finishes with it
	ui, _ = fake.state()
	require.Equal(t, "", ui, "irqbalance applied the NULL all the same")

	fake.mu.Lock()
	fake.stall = 0
	fake.mu.Unlock()
	n.ban(2) // the same CPU granted again
	require.NoError(t, n.r.Flush())
	require.NoError(t, n.r.Flush())
	ui, seen := fake.state()
	assert.Equal(t, "2,7", ui, "irqbalance must ban CPU 2 again; commands seen: %v", seen)
}

// TestIrqbalanceLateBanThenReleaseIsSent: the same cause the other way: a
// release gave irqbalance NULL (st.Told = "NULL"); the next ban's
// "settings cpus 2,7" is applied by a busy irqbalance that closes after
// the deadline (the pass fails for now, st.Told stays "NULL"); the
// container ends before the retry. The release's write of the original
// maps to NULL, which st.Told says was sent already: nothing is sent,
// the record is dropped, and irqbalance bans CPU 2 until it restarts.
func TestIrqbalanceLateBanThenReleaseIsSent(t *testing.T) {
	skipUnlessRoot(t)
	spec := twoNodes()
	spec.Processes = []procfixture.Process{irqbalanceProc(4242, "IRQBALANCE_BANNED_CPULIST=7")}
	sockets := filepath.Join(t.TempDir(), "run-irqbalance")
	fake := startSlowIrqbalance(t, sockets, 4242, cpuset.New(7))
	n := newNode(t, spec, sockets)
	n.ban(2)
	n.ban()
	ui, _ := fake.state()
	require.Equal(t, "", ui)

	fake.mu.Lock()
	fake.stall = 2500 * time.Millisecond
	fake.mu.Unlock()
	n.src.SetBanned(cpuset.New(2))
	require.Error(t, n.r.Flush(), "the ban timed out")
	time.Sleep(time.Second)
	ui, _ = fake.state()
	require.Equal(t, "2,7", ui, "irqbalance applied it all the same")
	fake.mu.Lock()
	fake.stall = 0
	fake.mu.Unlock()

	n.ban() // released before the retry
	require.NoError(t, n.r.Flush())
	ui, seen := fake.state()
	assert.Equal(t, "", ui, "irqbalance must get its own set back; commands seen: %v", seen)
	assert.Empty(t, irqbalanceRecords(t, n))
}
