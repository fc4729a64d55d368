package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestStatusSaysWhenNoDaemonRuns: the daemon wrote its state file and its
// status ("registered", "waiting-for-runtime" or "stopped"), then died
// (kill -9, OOM, a crash loop): no process holds the state directory's
// lock, so the runtime creates new containers unpinned. status, explain
// and their --json say so (they printed the tables, called
// the containers running and reported the dead pid's runtime state as if a
// daemon ran); while a daemon holds the lock they say it runs, and of a
// state directory without a lock file (a copied state file) nothing.
func TestStatusSaysWhenNoDaemonRuns(t *testing.T) {
	sysfsRoot := fixture.Root(t, "desktop-8c16t")
	dead := deadPID(t)
	for _, runtimeState := range []string{"registered", "waiting-for-runtime", "stopped"} {
		t.Run(runtimeState, func(t *testing.T) {
			dir := t.TempDir()
			stateFile := filepath.Join(dir, "state.json")
			lock, err := state.TryLock(stateFile)
			require.NoError(t, err)
			st := state.NewState()
			st.Containers["8d1f5e0c9a7b6d4e"] = state.ContainerState{PodUID: "u", PodNamespace: "telco", PodName: "dpdk", Container: "fwd",
				Pool: "shared", CPUs: "7", Mems: "0", Rule: "annotation", RuleDetail: "pool.cpupool.dev/container.fwd=shared"}
			store := state.NewFileStore(stateFile)
			require.NoError(t, store.Save(st))
			store.Close()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "daemon-status.json"), []byte(`{"runtime": {"state": "`+runtimeState+`", "since": "2026-03-01T08:00:00Z", "pid": `+strconv.Itoa(dead)+`, "socket": "/run/x.sock"}}`), 0o600))
			explainArgs := []string{"explain", "telco/dpdk", "--state-file", stateFile, "--sysfs-root", sysfsRoot, "--proc-root", dir}

			// A daemon runs: nothing to warn of, and --json says it runs.
			code, out, errOut := run(t, "status", "--state-file", stateFile)
			require.Equal(t, 0, code, errOut)
			assert.NotContains(t, out, "not running")
			assert.Equal(t, true, daemonRunningField(t, "status", "--state-file", stateFile, "--json"))
			assert.Equal(t, true, daemonRunningField(t, append(explainArgs, "--json")...))

			lock.Close() // the daemon is gone: nobody holds the lock
			held, known := state.Held(stateFile)
			require.True(t, known)
			require.False(t, held)

			const line = "Daemon: not running: no process holds the state directory's lock "
			code, out, errOut = run(t, "status", "--state-file", stateFile)
			require.Equal(t, 0, code, errOut)
			assert.Contains(t, out, "\n"+line+filepath.Join(dir, state.LockFile)+" (the last daemon, pid "+strconv.Itoa(dead)+", was "+runtimeState+" since 2026-03-01T08:00:00Z); ")
			assert.Contains(t, out, "containers the runtime creates now are not pinned")
			assert.NotContains(t, out, "Runtime: ", "the dead daemon's runtime state is in the line above, not as if it were now")
			code, out, errOut = run(t, "status", "--state-file", stateFile, "--map", "--sysfs-root", sysfsRoot)
			require.Equal(t, 0, code, errOut)
			assert.Contains(t, out, line)
			code, out, errOut = run(t, explainArgs...)
			require.Equal(t, 0, code, errOut)
			assert.Contains(t, out, line)

			assert.Equal(t, false, daemonRunningField(t, "status", "--state-file", stateFile, "--json"))
			assert.Equal(t, false, daemonRunningField(t, append(explainArgs, "--json")...))

			// No lock file: whether a daemon runs is not known, and
			// nothing is said.
			require.NoError(t, os.Remove(filepath.Join(dir, state.LockFile)))
			code, out, errOut = run(t, "status", "--state-file", stateFile)
			require.Equal(t, 0, code, errOut)
			assert.NotContains(t, out, "Daemon:")
			assert.Nil(t, daemonRunningField(t, "status", "--state-file", stateFile, "--json"))
		})
	}
}

// daemonRunningField runs the command and returns its JSON's
// daemonRunning: true, false, or nil when it is absent.
func daemonRunningField(t *testing.T, args ...string) any {
	t.Helper()
	code, out, errOut := run(t, args...)
	require.Equal(t, 0, code, errOut)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	return doc["daemonRunning"]
}

// deadPID is the pid of a process that has exited: a daemon that is gone.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.Process.Pid
}

// writeDaemonStatus writes daemon-status.json beside stateFile for a
// daemon of pid that registered.
func writeDaemonStatus(t *testing.T, stateFile string, pid int) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(stateFile), "daemon-status.json"),
		[]byte(`{"runtime": {"state": "registered", "since": "2026-03-01T08:00:00Z", "pid": `+strconv.Itoa(pid)+`, "socket": "/run/x.sock"}}`), 0o600))
}

// TestStatusOfACopiedStateDirIsNotKnownToHaveNoDaemon: an engineer copies
// the state directory (cp -a: the lock file comes along) and runs status
// on the copy on the node whose daemon runs. The copy's lock is free,
// but the daemon it names is alive: status said "Daemon: not running ...
// containers the runtime creates now are not pinned" and daemonRunning
// false. docs/commands.md says a copy is not known.
func TestStatusOfACopiedStateDirIsNotKnownToHaveNoDaemon(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	daemon, err := state.TryLock(stateFile) // the node's running daemon
	require.NoError(t, err)
	defer daemon.Close()
	store := state.NewFileStore(stateFile)
	require.NoError(t, store.Save(state.NewState()))
	store.Close()
	writeDaemonStatus(t, stateFile, os.Getpid()) // this process: alive
	snap := filepath.Join(t.TempDir(), "snap")
	require.NoError(t, os.MkdirAll(snap, 0o700))
	for _, name := range []string{"state.json", "daemon-status.json", state.LockFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(snap, name), b, 0o600))
	}
	copied := filepath.Join(snap, "state.json")
	code, out, errOut := run(t, "status", "--state-file", copied)
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "Daemon: not running", "the daemon it names (pid %d) runs and pins", os.Getpid())
	assert.Nil(t, daemonRunningField(t, "status", "--state-file", copied, "--json"), "not known")
}

// TestStatusOfADaemonWhoseLockFileWasReplaced: a daemon's lock file was
// removed under it (its lock is on an inode no one sees) and another
// process created a new one and let it go: the lock at the path is free
// while the daemon pins. The daemon it names is alive: not known.
func TestStatusOfADaemonWhoseLockFileWasReplaced(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	daemon, err := state.TryLock(stateFile)
	require.NoError(t, err)
	defer daemon.Close()
	store := state.NewFileStore(stateFile)
	require.NoError(t, store.Save(state.NewState()))
	store.Close()
	writeDaemonStatus(t, stateFile, os.Getpid())
	require.NoError(t, os.Remove(filepath.Join(dir, state.LockFile)))
	other, err := state.TryLock(stateFile) // restore-host's, or a second daemon's
	require.NoError(t, err)
	require.NoError(t, other.Close())

	code, out, errOut := run(t, "status", "--state-file", stateFile)
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "Daemon: not running", "the daemon (pid %d) is alive and pinning", os.Getpid())
	assert.Nil(t, daemonRunningField(t, "status", "--state-file", stateFile, "--json"))

	// Without daemon-status.json nothing names the daemon: not known.
	require.NoError(t, os.Remove(filepath.Join(dir, "daemon-status.json")))
	assert.Nil(t, daemonRunningField(t, "status", "--state-file", stateFile, "--json"))
}
