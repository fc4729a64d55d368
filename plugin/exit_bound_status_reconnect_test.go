package plugin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunsExitIsBoundedWhileAStatusWriteHangsAsItReconnects: docs/state.md
// says a write that does not return (a hung disk) cannot keep the daemon
// from exiting, "also while it reconnects". Run's reconnect loop records
// the runtime's state (RuntimeWaiting once the connection is lost,
// RuntimeRegistered once it is back) through noteStatus, which writes the
// status file under statusMu with no bound, outside the way out's budget.
// A status write that hangs then (here: one holding statusMu, as a write to
// a hung disk does; Run's own write would hang the same) keeps Run from
// ever reaching its bounded way out: the SIGTERM is ignored until the
// SIGKILL.
func TestRunsExitIsBoundedWhileAStatusWriteHangsAsItReconnects(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startBoundedPlugin(t, f)
	registered := rp.p.conn.now.Load()
	rp.p.statusMu.Lock() // a status write hangs on the disk
	f.restart()          // the runtime restarts; Run records it and reconnects
	require.Eventually(t, func() bool { return rp.p.conn.now.Load() != registered }, 5*time.Second, 10*time.Millisecond,
		"Run records the lost connection")
	time.Sleep(50 * time.Millisecond) // Run goes on to its status write, or past it
	requireRunExitsInTime(t, rp, rp.p.statusMu.Unlock, " while a status write hung as it reconnected")
}
