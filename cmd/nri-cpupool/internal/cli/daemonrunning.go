package cli

// Whether a daemon runs on the state file status and explain read. The
// state file and daemon-status.json outlive the daemon: one killed by
// kill -9 or the OOM killer, or in a crash loop, leaves them saying
// "registered" with its pid. Only the state directory's lock tells: the
// daemon holds it for as long as it lives, and the kernel drops it with
// the process. While no process holds it, the runtime creates containers
// without the plugin (NRI fails open: unpinned, on every CPU; with the
// fail-closed drop-in it refuses them), which the tables cannot show.
//
// A free lock alone is not proof: a copy of the state directory (cp -a)
// brings a lock file no one holds, and a lock file removed under a live
// daemon is replaced by one no one holds. "Not running" is said only when
// the daemon daemon-status.json names is gone too.

import (
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cpupool/nri-cpupool/state"
)

// daemonLiveness is what the state directory's lock says of the daemon.
type daemonLiveness struct {
	// Known is false when the lock cannot tell: no lock file (a state
	// file copied from another node), or one this user cannot open; or
	// when it is free but the daemon daemon-status.json names may be
	// alive (a copied state directory, a replaced lock file), or none is
	// named.
	Known bool
	// Running: a process holds the lock: the daemon.
	Running bool
	// Lock is the lock file's path.
	Lock string
}

// livenessOf asks the lock of stateFile's directory and, when it is
// free, whether the last daemon is gone.
func livenessOf(stateFile string) daemonLiveness {
	held, known := state.Held(stateFile)
	if known && !held && !lastDaemonGone(stateFile) {
		known = false
	}
	return daemonLiveness{Known: known, Running: held, Lock: state.LockPath(stateFile)}
}

// lastDaemonGone tells whether the process daemon-status.json names has
// exited (kill(pid, 0) says ESRCH). A process that exists, even one this
// user may not signal (EPERM), may be the daemon, and a file that names
// none says nothing. A daemon in another PID namespace (the chart's pod
// seen from the node) names a pid of its own: it holds the lock while it
// runs, and once gone its pid here is at worst another process, which
// leaves the answer unknown, never wrongly "not running".
func lastDaemonGone(stateFile string) bool {
	ds, ok, err := state.ReadDaemonStatus(state.DaemonStatusFile(stateFile))
	if err != nil || !ok || ds.Runtime == nil || ds.Runtime.PID <= 0 {
		return false
	}
	return errors.Is(unix.Kill(ds.Runtime.PID, 0), unix.ESRCH)
}

// NotRunning tells that no daemon runs, for certain.
func (l daemonLiveness) NotRunning() bool { return l.Known && !l.Running }

// JSON is the daemonRunning field of status and explain --json: nil
// (absent) when it is not known.
func (l daemonLiveness) JSON() *bool {
	if !l.Known {
		return nil
	}
	running := l.Running
	return &running
}

// writeDaemonNotRunning prints, when no daemon runs, that none does, what
// the last one said of itself, and what that means for new containers.
func writeDaemonNotRunning(w io.Writer, stateFile string, l daemonLiveness) {
	if !l.NotRunning() {
		return
	}
	fmt.Fprintf(w, "Daemon: not running: no process holds the state directory's lock %s", l.Lock)
	if ds, ok, err := state.ReadDaemonStatus(state.DaemonStatusFile(stateFile)); err == nil && ok && ds.Runtime != nil {
		r := ds.Runtime
		fmt.Fprintf(w, " (the last daemon, pid %d, was %s since %s)", r.PID, r.State, r.Since.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w, "; containers the runtime creates now are not pinned (they run on every CPU, or, with the fail-closed drop-in, are refused) until it runs again, and what is shown here is what it last wrote: start it (its service or pod; a runtime-launched plugin starts with the runtime)")
}
