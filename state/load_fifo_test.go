package state

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A named pipe at the state file: os.ReadFile of it waits for a writer
// that never comes, and the state file is read at the daemon's start,
// under the plugin's lock at Configure of a runtime-launched plugin, and
// by `status`, which all hung for good. Load takes it for an unreadable
// state file (moved aside, rebuilt from the runtime); ReadState refuses
// it saying what it is and what to do.

// TestLoadDoesNotHangOnAFIFOStateFile: Load returns at once, the pipe is
// moved to .unreadable-<time>, and Save then writes a regular file there.
func TestLoadDoesNotHangOnAFIFOStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	s := NewFileStore(path)
	defer s.Close()
	s.now = func() time.Time { return time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC) }
	done := make(chan error, 1)
	go func() {
		_, err := s.Load()
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Second):
		t.Fatalf("Load(%s) still blocked after 2s on a FIFO with no writer", path)
	}
	require.ErrorIs(t, err, ErrStateDiscarded, "the plugin rebuilds from the runtime")
	assert.ErrorContains(t, err, path+": a named pipe, not a regular file")
	aside := path + ".unreadable-20261207T010203.000000000Z"
	assert.ErrorContains(t, err, "moved to "+aside)
	fi, serr := os.Lstat(aside)
	require.NoError(t, serr, "the pipe is moved aside")
	assert.NotZero(t, fi.Mode()&os.ModeNamedPipe)

	st := NewState()
	st.Containers["c1"] = ContainerState{Pool: "shared", CPUs: "0-1"}
	require.NoError(t, s.Save(st))
	back, err := ReadState(path)
	require.NoError(t, err)
	assert.Contains(t, back.Containers, "c1")
}

// TestReadStateDoesNotHangOnAFIFOStateFile: `status` reads the state file
// with ReadState, which refuses the pipe at once.
func TestReadStateDoesNotHangOnAFIFOStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	done := make(chan error, 1)
	go func() {
		_, err := ReadState(path)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, atomicfile.ErrNotRegular)
		assert.ErrorContains(t, err, path+": a named pipe, not a regular file; not read")
		assert.ErrorContains(t, err, "moves what is there aside to "+path+".unreadable-<time>")
	case <-time.After(2 * time.Second):
		t.Fatalf("ReadState(%s) still blocked after 2s on a FIFO with no writer", path)
	}
	fi, err := os.Lstat(path)
	require.NoError(t, err, "status never moves the file")
	assert.NotZero(t, fi.Mode()&os.ModeNamedPipe)
}
