package plugin

// The daemon's status beside the state file, for `nri-cpupool status`:
// the plugin writes it here; its types and file are package state's
// (state/daemonstatus.go), so that the CLI reads it without the plugin.
// The names below keep the plugin's own.

import (
	"os"
	"time"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
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
// state again (each retry) writes nothing. Only Run's loop calls it; its
// way out records "stopped" with noteRuntimeNow.
//
// Readiness (/readyz, cpupool_runtime_connected) gets the change at once.
// The status file gets it from the background (writeRuntimeStatus): Run
// must not wait for a status write, which a hung disk (or a reload's
// write under way on it) keeps forever, and a SIGTERM must reach its
// bounded way out (exitbudget.go) also while it reconnects. Neither waits
// for the plugin's lock: when a handler hangs holding it, or waiting for
// it, the runtime gives up on the plugin and drops the connection, and
// that loss must show while the lock is still held.
func (p *Plugin) noteRuntime(state, socket, detail string) {
	if p.recordRuntime(state, socket, detail) == nil {
		return
	}
	// One write queued at a time: it writes the latest record when it
	// runs, so a change made while it waits is in it; one made after it
	// read the record queues the next. Only the latest state is kept, in
	// order: a write never puts an older record over a newer one.
	if !p.statusQueued.CompareAndSwap(false, true) {
		return
	}
	p.exit.late.Add(1)
	proflabel.Go(proflabel.StatusWriter, func() {
		defer p.exit.late.Done()
		p.writeRuntimeStatus()
	})
}

// writeRuntimeStatus writes the connection's latest state to the status
// file. Once the way out has begun it writes nothing: the way out writes
// "stopped" itself (noteRuntimeNow), bounded.
func (p *Plugin) writeRuntimeStatus() {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	// Cleared before the record is read: a change stored after this
	// queues a write of its own.
	p.statusQueued.Store(false)
	if p.exit.begun.Load() {
		return
	}
	rs := p.conn.now.Load()
	p.changeStatus(func(s *DaemonStatus) { s.Runtime = rs })
}

// noteRuntimeNow records a change of the connection to the runtime and
// writes the status file before it returns: the way out's "stopped",
// which its bound (exitbudget.go) waits for at most what is left.
func (p *Plugin) noteRuntimeNow(state, socket, detail string) {
	if rs := p.recordRuntime(state, socket, detail); rs != nil {
		p.noteStatus(func(s *DaemonStatus) { s.Runtime = rs })
	}
}

// recordRuntime gives readiness a change of the connection to the runtime
// and returns its record, nil when the state is the same as before.
func (p *Plugin) recordRuntime(state, socket, detail string) *RuntimeStatus {
	// The last record readiness got is the status file's too (both are
	// set here alone), read without the lock.
	if r := p.conn.now.Load(); r != nil && r.State == state && r.Detail == detail {
		return nil
	}
	rs := &RuntimeStatus{State: state, Since: time.Now().UTC(), PID: os.Getpid(), Socket: socket, Detail: detail}
	// Nothing changes a record once made: readiness and the status share it.
	p.conn.now.Store(rs)
	return rs
}

// noteStatus changes the daemon's status and writes it. The status is
// statusMu's, not the plugin's lock's, so that it is written while a
// handler holds that; change must not take it either. It must not be
// called with the lock held: the write is a file's. statusMu keeps two
// writes in the order of their changes.
func (p *Plugin) noteStatus(change func(*DaemonStatus)) {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	p.changeStatus(change)
}

// changeStatus is noteStatus under statusMu.
func (p *Plugin) changeStatus(change func(*DaemonStatus)) {
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
