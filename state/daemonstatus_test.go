package state

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDaemonStatusFileRoundTrip: the status the daemon writes beside the
// state file is what the CLI reads, and no file is no status.
func TestDaemonStatusFileRoundTrip(t *testing.T) {
	path := DaemonStatusFile(filepath.Join(t.TempDir(), "state.json"))
	_, ok, err := ReadDaemonStatus(path)
	require.NoError(t, err)
	assert.False(t, ok, "no file yet")

	since := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	want := DaemonStatus{
		Runtime:    &RuntimeStatus{State: RuntimeRegistered, Since: since, PID: 42, Socket: "/var/run/nri/nri.sock"},
		LastReload: &ReloadStatus{Time: since, Source: "SIGHUP", Result: "applied", DurationMS: 1.5},
	}
	require.NoError(t, WriteDaemonStatus(path, want))
	got, ok, err := ReadDaemonStatus(path)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, want, got)
}
