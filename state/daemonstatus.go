package state

// The daemon's status file beside the state file, for `nri-cpupool status`:
// the daemon's connection to the runtime and its last config reload. It is
// not state (nothing reads it back, and it lives in its own file so that
// the state file's schema does not change for it), but it is here rather
// than in the plugin, which writes it, for the same reason as the state
// file: the CLI reads it without linking the NRI glue.

import (
	"encoding/json"
	"fmt"
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
// (the plugin's ReloadApplied, ReloadRefused, ReloadInvalid, or
// ReloadPending while it waits) and why it was not applied.
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

// WriteDaemonStatus replaces the status file at path with s, atomically:
// a reader sees the old status or the new one, never a part.
func WriteDaemonStatus(path string, s DaemonStatus) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the daemon's status: %w", err)
	}
	return atomicfile.Replace(path, append(data, '\n'), false)
}
