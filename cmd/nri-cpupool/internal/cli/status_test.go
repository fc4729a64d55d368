package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
)

// TestStatusOfADaemonThatWaitsForTheRuntime: while the daemon holds the
// state directory's lock and waits for the runtime, status says so (no
// state file yet: why, and what to do); once a state file exists, a line
// says the daemon waits (issue 43, item 5).
func TestStatusOfADaemonThatWaitsForTheRuntime(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	lock, err := state.TryLock(stateFile)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "daemon-status.json"), []byte(`{"runtime": {"state": "waiting-for-runtime", "since": "2026-03-01T08:00:00Z", "pid": 42, "socket": "/run/x.sock", "detail": "cannot reach the runtime at /run/x.sock; retrying"}}`), 0o600))
	code, _, errOut := run(t, "status", "--state-file", stateFile)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no state file "+stateFile+" yet: the daemon (pid 42) runs and has waited for the runtime since 2026-03-01T08:00:00Z: cannot reach the runtime at /run/x.sock; retrying. It writes the state file once")
	assert.NotContains(t, errOut, "is the plugin running")

	code, _, errOut = run(t, "audit", "--state-file", stateFile)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "has waited for the runtime", "audit reads the state file the same way")

	store := state.NewFileStore(stateFile)
	require.NoError(t, store.Save(state.NewState()))
	store.Close()
	code, out, errOut := run(t, "status", "--state-file", stateFile)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "\nRuntime: waiting-for-runtime since 2026-03-01T08:00:00Z: cannot reach the runtime at /run/x.sock; retrying\n")
}
