// Package sdnotify tells systemd about the daemon's state (sd_notify(3)):
// READY=1 once registered with the runtime, STATUS= lines while it waits or
// reconnects, STOPPING=1 on shutdown. It needs no libsystemd: the protocol is
// one datagram to the unix socket named by $NOTIFY_SOCKET.
package sdnotify

import (
	"fmt"
	"net"
	"os"
)

// Socket is the environment variable systemd sets for Type=notify services.
const Socket = "NOTIFY_SOCKET"

// Messages the daemon sends.
const (
	Ready    = "READY=1"
	Stopping = "STOPPING=1"
)

// Status is a free-form line that `systemctl status` shows.
func Status(s string) string { return "STATUS=" + s }

// Notify sends state to the service manager. Without $NOTIFY_SOCKET (not run
// by systemd, or not Type=notify) it does nothing and reports false.
func Notify(state string) (bool, error) {
	name := os.Getenv(Socket)
	if name == "" {
		return false, nil
	}
	addr := &net.UnixAddr{Name: name, Net: "unixgram"}
	if name[0] == '@' { // abstract namespace
		addr.Name = "\x00" + name[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		return false, fmt.Errorf("notifying systemd at %s: %w", name, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("notifying systemd at %s: %w", name, err)
	}
	return true, nil
}
