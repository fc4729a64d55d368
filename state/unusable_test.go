package state

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A state file Load cannot use and cannot move aside (a state directory
// that went read-only) still lets the plugin rebuild from the runtime,
// and is never replaced before it is moved aside: its records may be the
// only copy (Load returned a plain error, Synchronize failed at
// every reconnect and nothing was pinned).

const corruptState = `{"schemaVersion":7,"checksum":"sha256:00","state":{"containers":{}}`

// TestCorruptStateOnReadOnlyDiskStillRebuilds: Load's error wraps
// ErrStateDiscarded, so that the plugin rebuilds, and the file stays.
func TestCorruptStateOnReadOnlyDiskStillRebuilds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	require.NoError(t, os.WriteFile(path, []byte(corruptState), 0o600))
	var (
		st  *State
		err error
	)
	onReadOnly(t, dir, func() { st, err = NewFileStore(path).Load() })
	require.ErrorIs(t, err, ErrStateDiscarded, "a corrupt file that cannot be moved aside must still let the plugin rebuild from the runtime")
	assert.Contains(t, err.Error(), "could not be moved aside")
	assert.Empty(t, st.Containers)
	kept, rerr := os.ReadFile(path)
	require.NoError(t, rerr)
	assert.Equal(t, corruptState, string(kept))
}

// failingRename fails every rename of from, as a read-only directory does,
// while fail is set.
func failingRename(from string, fail *bool) func(string, string) error {
	return func(a, b string) error {
		if *fail && a == from {
			return &os.LinkError{Op: "rename", Old: a, New: b, Err: syscall.EROFS}
		}
		return os.Rename(a, b)
	}
}

// TestUnmovedStateFileIsMovedAsideBeforeAnySave: Save fails, and leaves
// the file, until it can move it aside; then it writes.
func TestUnmovedStateFileIsMovedAsideBeforeAnySave(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(path, []byte(corruptState), 0o600))
	s := NewFileStore(path)
	defer s.Close()
	s.now = func() time.Time { return time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC) }
	fail := true
	s.rename = failingRename(path, &fail)
	_, err := s.Load()
	require.ErrorIs(t, err, ErrStateDiscarded)
	st := NewState()
	st.Containers["c1"] = ContainerState{Pool: "shared", CPUs: "0-1"}
	err = s.Save(st)
	require.Error(t, err, "the corrupt file is the only copy of what it held: not replaced before it is moved aside")
	assert.Contains(t, err.Error(), "must first be moved to "+path+".corrupt-20261207T010203")
	kept, _ := os.ReadFile(path)
	assert.Equal(t, corruptState, string(kept))

	fail = false
	require.NoError(t, s.Save(st))
	aside, _ := os.ReadFile(path + ".corrupt-20261207T010203.000000000Z")
	assert.Equal(t, corruptState, string(aside), "moved aside as it was")
	back, err := ReadState(path)
	require.NoError(t, err)
	assert.Contains(t, back.Containers, "c1")
}

// TestUnreadableStateIsRebuiltAndKeptAside: a file that cannot be read
// (here a directory: EISDIR, as EIO or EACCES) may hold good records; the
// plugin rebuilds from the runtime, and the file is moved aside, not
// overwritten.
func TestUnreadableStateIsRebuiltAndKeptAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.Mkdir(path, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(path, "inside"), []byte("x"), 0o600))
	s := NewFileStore(path)
	defer s.Close()
	s.now = func() time.Time { return time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC) }
	fail := true
	s.rename = failingRename(path, &fail)
	_, err := s.Load()
	require.ErrorIs(t, err, ErrStateDiscarded)
	assert.Contains(t, err.Error(), "cannot be read")
	require.Error(t, s.Save(NewState()))
	fail = false
	require.NoError(t, s.Save(NewState()))
	inside, err := os.ReadFile(filepath.Join(path+".unreadable-20261207T010203.000000000Z", "inside"))
	require.NoError(t, err, "the unreadable file is kept aside")
	assert.Equal(t, "x", string(inside))
	_, err = ReadState(path)
	assert.NoError(t, err)
	assert.False(t, errors.Is(err, os.ErrNotExist))
}
