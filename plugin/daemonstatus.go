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
// Readiness (/readyz, cpupool_runtime_connected) gets the change first.
// Neither it nor the status file that follows (noteStatus) waits for the
// plugin's lock: when a handler hangs holding it, or waiting for it, the
// runtime gives up on the plugin and drops the connection, and that loss
// must show while the lock is still held; and the daemon's way out must
// record "stopped" and go on to its bounded last write.
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

// noteStatus changes the daemon's status and writes it. The status is
// statusMu's, not the plugin's lock's, so that it is written while a
// handler holds that; change must not take it either. It must not be
// called with the lock held: the write is a file's. statusMu keeps two
// writes in the order of their changes.
func (p *Plugin) noteStatus(change func(*DaemonStatus)) {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	change(&p.status)
	if p.statusClosed {
		return // Close released the state directory: it is another process's now
	}
	file := p.statusFile.Load()
	if file == nil {
		return // not configured: New failed
	}
	path := *file
	if err := state.WriteDaemonStatus(path, p.status); err != nil {
		p.log.Warnf("writing the daemon's status %s: %v", path, err)
	}
}
