package plugin

// The daemon's status beside the state file, for `nri-cpupool status`:
// the plugin writes it here; its types and file are package state's
// (state/daemonstatus.go), so that the CLI reads it without the plugin.
// The names below keep the plugin's own.

import (
	"os"
	"time"

	"github.com/cpupool/nri-cpupool/state"
)

// The status file's types and the states of the connection to the
// runtime, as package state defines them.
type (
	DaemonStatus  = state.DaemonStatus
	RuntimeStatus = state.RuntimeStatus
	ReloadStatus  = state.ReloadStatus
)

const (
	RuntimeWaiting    = state.RuntimeWaiting
	RuntimeRegistered = state.RuntimeRegistered
	RuntimeStopped    = state.RuntimeStopped
)

// DaemonStatusFile is the status file for a state file: beside it.
func DaemonStatusFile(stateFile string) string { return state.DaemonStatusFile(stateFile) }

// ReadDaemonStatus reads a status file; ok is false when there is none.
func ReadDaemonStatus(path string) (s DaemonStatus, ok bool, err error) {
	return state.ReadDaemonStatus(path)
}

// noteRuntime records a change of the connection to the runtime; the same
// state again (each retry) writes nothing. Only Run calls it.
//
// Readiness (/readyz, cpupool_runtime_connected) gets the change before
// anything takes the plugin's lock: when a handler hangs holding it, or
// waiting for it, the runtime gives up on the plugin and drops the
// connection, and that loss must show while the lock is still held. The
// status file follows under the lock (noteStatus), when it can.
func (p *Plugin) noteRuntime(state, socket, detail string) {
	// The last record readiness got is the status file's too (both are
	// set here alone), read without the lock.
	if r := p.conn.now.Load(); r != nil && r.State == state && r.Detail == detail {
		return
	}
	rs := &RuntimeStatus{State: state, Since: time.Now().UTC(), PID: os.Getpid(), Socket: socket, Detail: detail}
	// Nothing changes a record once made: readiness and the status share it.
	p.conn.now.Store(rs)
	p.noteStatus(func(s *DaemonStatus) { s.Runtime = rs })
}

// noteStatus changes the daemon's status and writes it. It must not be
// called with the lock held: the write is a file's, and statusMu keeps
// two writes in the order of their changes.
func (p *Plugin) noteStatus(change func(*DaemonStatus)) {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	p.mu.Lock()
	change(&p.status)
	// A copy is enough: a change replaces a record, never alters one.
	status := p.status
	path := DaemonStatusFile(p.cfg.StateFile)
	p.mu.Unlock()
	if p.statusClosed {
		return // Close released the state directory: it is another process's now
	}
	if err := state.WriteDaemonStatus(path, status); err != nil {
		p.log.Warnf("writing the daemon's status %s: %v", path, err)
	}
}
