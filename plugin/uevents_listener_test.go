package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The uevent listener is waited for: its socket (and goroutine) must not
// outlive Run (by up to ueventPoll).
func TestUeventSocketClosedWhenRunReturns(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), func(p *Plugin) { p.hotplug.uevents = nil })
	require.Eventually(t, func() bool { return ueventSockets(t) > 0 }, 3*time.Second, 5*time.Millisecond, "the listener opened its socket")
	rp.stop()
	select {
	case <-rp.done:
	default:
	}
	assert.Equal(t, 0, ueventSockets(t), "uevent sockets open after Run returned")
}

// ueventSockets counts this process's NETLINK_KOBJECT_UEVENT sockets.
func ueventSockets(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/net/netlink")
	require.NoError(t, err)
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		fs := strings.Fields(line)
		if len(fs) >= 10 && fs[1] == "15" {
			inodes["socket:["+fs[9]+"]"] = true
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && inodes[l] {
			n++
		}
	}
	return n
}

// Only the kernel's messages (sender port 0) are taken: any process of the
// network namespace with CAP_NET_ADMIN may send to the uevent group, and a
// forged "online" must not make the plugin rewrite cpusets. A message sent
// from user space to the group the listener reads must not reach it.
func TestUeventFromUserSpaceIsIgnored(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan cpuUevent, 4)
	done := make(chan error, 1)
	go func() { done <- cpuUevents(ctx, out) }()
	defer func() {
		cancel()
		<-done
	}()
	require.Eventually(t, func() bool { return ueventSockets(t) > 0 }, 3*time.Second, 5*time.Millisecond, "the listener opened its socket")
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_KOBJECT_UEVENT)
	require.NoError(t, err)
	defer unix.Close(fd)
	msg := []byte("online@/devices/system/cpu/cpu3\x00ACTION=online\x00DEVPATH=/devices/system/cpu/cpu3\x00SUBSYSTEM=cpu\x00SEQNUM=1\x00")
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		t.Skipf("cannot send to the uevent group here (needs CAP_NET_ADMIN): %v", err)
	}
	select {
	case ev := <-out:
		t.Fatalf("a uevent sent from user space was taken as the kernel's: %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}
}
