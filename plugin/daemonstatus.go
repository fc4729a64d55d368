package plugin

// The daemon's status beside the state file, for `nri-cpupool status`:
// its connection to the runtime and the last config reload. It is not
// state:
// nothing reads it back, and it lives in its own file so that the state
// file's schema does not change for it.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// DaemonStatus is what `nri-cpupool status` shows of the running daemon
// beyond the state.
type DaemonStatus struct {
	// LastReload is the last config reload, nil before the first.
	LastReload *ReloadStatus `json:"lastReload,omitempty"`
	// Runtime is the daemon's connection to the runtime; nil in files of
	// versions that did not write it.
	Runtime *RuntimeStatus `json:"runtime,omitempty"`
}

// The states of the daemon's connection to the runtime (RuntimeStatus).
const (
	// RuntimeWaiting: the daemon runs and cannot reach the runtime (not
	// started yet, restarting, NRI off); it retries. The state file is
	// written once the runtime has synchronized the plugin.
	RuntimeWaiting = "waiting-for-runtime"
	// RuntimeRegistered: registered with the runtime.
	RuntimeRegistered = "registered"
	// RuntimeStopped: the daemon has stopped.
	RuntimeStopped = "stopped"
)

// RuntimeStatus is the daemon's connection to the runtime: since when it
// is in State, the daemon's pid and socket, and, while it waits, why.
type RuntimeStatus struct {
	State  string    `json:"state"`
	Since  time.Time `json:"since"`
	PID    int       `json:"pid"`
	Socket string    `json:"socket,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// ReloadStatus is one config reload: when, what asked for it, its result
// (ReloadApplied, ReloadRefused, ReloadInvalid) and why it was not applied.
type ReloadStatus struct {
	Time   time.Time `json:"time"`
	Source string    `json:"source"`
	Result string    `json:"result"`
	Reason string    `json:"reason,omitempty"`
	// Trigger is when it was asked for (the signal, the file's first
	// change, the runtime's Configure); DurationMS, the milliseconds from
	// then until it was applied (the new pools in force and the updates
	// of the containers that follow them answered by the runtime) or
	// decided. Absent in files of versions that did not measure it.
	Trigger    time.Time `json:"trigger,omitzero"`
	DurationMS float64   `json:"durationMs,omitempty"`
	// InForceMS is the plugin's own part of DurationMS: the milliseconds
	// from the trigger until the new pools were in force and the
	// members' updates sent (the rest is the runtime applying them).
	InForceMS float64 `json:"inForceMs,omitempty"`
	// Updated counts the containers that follow the pools whose update
	// the runtime took with the reload (others follow at the next reply).
	Updated int `json:"updated,omitempty"`
}

// DaemonStatusFile is the status file for a state file: beside it.
func DaemonStatusFile(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), "daemon-status.json")
}

// ReadDaemonStatus reads a status file; ok is false when there is none
// (no reload since the daemon's first start).
func ReadDaemonStatus(path string) (s DaemonStatus, ok bool, err error) {
	ok, err = atomicfile.ReadJSON(path, &s)
	return s, ok, err
}

// noteRuntime records a change of the connection to the runtime; the same
// state again (each retry) writes nothing.
func (p *Plugin) noteRuntime(state, socket, detail string) {
	p.mu.Lock()
	r := p.status.Runtime
	same := r != nil && r.State == state && r.Detail == detail
	p.mu.Unlock()
	if same {
		return
	}
	rs := &RuntimeStatus{State: state, Since: time.Now().UTC(), PID: os.Getpid(), Socket: socket, Detail: detail}
	// Readiness reads the same record without the lock (health.go);
	// nothing changes a record once made.
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
	data, err := json.MarshalIndent(p.status, "", "  ")
	path := DaemonStatusFile(p.cfg.StateFile)
	p.mu.Unlock()
	if err == nil {
		err = atomicfile.Replace(path, append(data, '\n'), false)
	}
	if err != nil {
		p.log.Warnf("writing the daemon's status %s: %v", path, err)
	}
}
