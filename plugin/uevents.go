package plugin

// The kernel's CPU uevents, beside the online mask the hotplug watcher
// polls: a CPU that goes offline and comes back between two reads of the
// mask (a script's echo 0 / echo 1, a firmware reset) leaves the mask as
// it was, so the poll never sees it, yet cgroup v1 dropped the CPU from
// the cpuset.cpus of the containers that ran on it for good. The kernel
// says every such change on the uevent netlink socket
// ("online@/devices/system/cpu/cpu12"), which any process may listen to
// in a network namespace owned by the initial user namespace (the kernel
// broadcasts uevents to every such namespace since Linux 4.18; one in a
// user namespace of its own hears none, silently);
// the watcher gives the CPU back on each "online" it hears (giveBack),
// whether or not the mask changed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// cpuUevent is the kernel's word that a CPU went offline or came online.
// cpu -1 stands for any CPU: events were lost (the socket's buffer
// overflowed), so any CPU may have gone offline and come back.
type cpuUevent struct {
	cpu    int
	online bool
}

// cpuDevPrefix is the device path of CPU n without n.
const cpuDevPrefix = "/devices/system/cpu/cpu"

// parseCPUUevent reads one kernel uevent message: a header
// "ACTION@DEVPATH", then NUL-separated KEY=VALUE lines. ok is false for
// anything but a CPU going offline or coming online.
func parseCPUUevent(msg []byte) (cpuUevent, bool) {
	header, _, _ := bytes.Cut(msg, []byte{0})
	action, devpath, found := bytes.Cut(header, []byte{'@'})
	if !found || !bytes.HasPrefix(devpath, []byte(cpuDevPrefix)) {
		return cpuUevent{}, false
	}
	var online bool
	switch string(action) {
	case "online":
		online = true
	case "offline":
	default:
		return cpuUevent{}, false
	}
	n := devpath[len(cpuDevPrefix):]
	if len(n) == 0 || len(n) > 5 { // bounded: no CPU has a six-digit number
		return cpuUevent{}, false
	}
	cpu, err := strconv.Atoi(string(n))
	if err != nil || cpu < 0 {
		return cpuUevent{}, false
	}
	return cpuUevent{cpu: cpu, online: online}, true
}

// ueventPoll is how long a read of the socket waits before it looks
// whether the watcher stopped.
const ueventPoll = time.Second

// openUevents opens the kernel's uevent socket (group 1: the kernel's own
// messages).
func openUevents() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return -1, fmt.Errorf("opening the uevent socket: %w", err)
	}
	tv := unix.NsecToTimeval(ueventPoll.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("uevent socket: setting its read timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("binding the uevent socket: %w", err)
	}
	return fd, nil
}

// cpuUevents sends the CPU uevents the kernel broadcasts on out until ctx
// ends. The error is why it could not listen (no netlink, no permission);
// the watcher then relies on its poll alone.
func cpuUevents(ctx context.Context, out chan<- cpuUevent) error {
	fd, err := openUevents()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf := make([]byte, 16<<10) // a uevent is at most a few KiB
	for ctx.Err() == nil {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		var ev cpuUevent
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			ev = cpuUevent{cpu: -1, online: true} // some were lost
		case err != nil:
			return fmt.Errorf("reading the uevent socket: %w", err)
		default:
			if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
				continue // not the kernel's
			}
			var ok bool
			if ev, ok = parseCPUUevent(buf[:n]); !ok {
				continue
			}
		}
		select {
		case out <- ev:
		case <-ctx.Done():
		}
	}
	return nil
}
