package plugin

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestRunsExitIsBoundedWhenAHandlerTakesTheLockAsTheReconnectRegisters:
// docs/state.md says a handler stuck under the plugin's lock cannot keep
// the daemon from exiting, "also while it reconnects". Once the stub's
// Start has returned, Run still takes the lock with no bound: setPush
// (push.go) locks p.mu to send pending updates. The runtime's first
// Synchronize on the new connection (NRI sends it right after Configure's
// reply), or any handler, that takes the lock then and hangs keeps Run
// there: a SIGTERM never reaches the bounded way out, and the daemon dies
// only by the SIGKILL at the end of the grace period.
func TestRunsExitIsBoundedWhenAHandlerTakesTheLockAsTheReconnectRegisters(t *testing.T) {
	f := newFakeRuntime(t, false)
	var registrations atomic.Int32
	stuck := make(chan struct{})
	rp := startPluginSetUp(t, f, desktop, statePath(f), boundExit, func(rp *runningPlugin) {
		rp.hooks.Registered = func() {
			if registrations.Add(1) != 2 {
				return
			}
			// A handler takes the lock as the reconnect registers, and hangs.
			go func() { rp.p.mu.Lock(); close(stuck) }()
			<-stuck
		}
	})
	f.restart() // the runtime restarts; Run reconnects
	select {
	case <-stuck:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not reconnect")
	}
	time.Sleep(50 * time.Millisecond) // Run goes on to setPush
	requireRunExitsInTime(t, rp, rp.p.mu.Unlock, ": a handler held the lock as the reconnect registered")
}
