package plugin

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunsExitIsBoundedWhileReconnectingUnderAStuckHandler: the way out is
// documented as bounded (docs/state.md: "a handler stuck under the
// plugin's lock cannot keep the daemon from exiting"). A stuck handler
// makes the runtime drop the plugin (or an operator restarts the runtime):
// Run then reconnects, and its reconnect takes the plugin's lock with no
// bound (setNRIVersion before Start; the runtime's Configure, which Start
// waits for, after it). A SIGTERM then never reaches the bounded way out:
// Run does not return until the handler lets go, i.e. the kubelet's or
// systemd's SIGKILL ends the daemon.
func TestRunsExitIsBoundedWhileReconnectingUnderAStuckHandler(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startBoundedPlugin(t, f)
	rp.p.mu.Lock() // a handler stuck under the lock
	f.restart()    // the runtime drops the plugin; Run reconnects
	require.Eventually(t, runIsReconnecting, 5*time.Second, 10*time.Millisecond, "Run reconnecting")
	requireRunExitsInTime(t, rp, rp.p.mu.Unlock, " while reconnecting under a held lock")
}

// TestRunsExitIsBoundedAfterTheRuntimeDropsAStuckPlugin: the same with
// nothing but the stuck handler. A creation waits for the held lock; the
// runtime's request timeout (2 s) passes and it closes the plugin's
// connection (NRI's adaptation does so on DeadlineExceeded); Run
// reconnects and waits for the lock. This is where a daemon whose
// CpupoolHandlerStuck fires is when the kubelet or systemd stops it.
func TestRunsExitIsBoundedAfterTheRuntimeDropsAStuckPlugin(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startBoundedPlugin(t, f)
	pod := f.runPod(podSpec{name: "stuck"})
	rp.p.mu.Lock() // a handler stuck under the lock
	created := make(chan struct{})
	go func() {
		defer close(created)
		f.createContainer(pod, "c", 1000) //nolint:errcheck // times out
	}()
	require.Eventually(t, runIsReconnecting, 10*time.Second, 20*time.Millisecond, "the runtime drops the stuck plugin and Run reconnects")
	// The creation ends once the lock is let go, if not before.
	requireRunExitsInTime(t, rp, func() { rp.p.mu.Unlock(); <-created }, " after the runtime dropped the stuck plugin")
}

// TestALateConfigureChangesNothingOnTheWayOut: a reconnect Run gave up
// may still let the runtime's Configure through once a stuck handler lets
// go; it must not load, reload or write state beside or after Close.
func TestALateConfigureChangesNothingOnTheWayOut(t *testing.T) {
	p := &Plugin{}
	p.exit.begun.Store(true)
	_, err := p.Configure(context.Background(), "", "containerd", "2.1")
	require.ErrorIs(t, err, errStopping)
	require.Empty(t, p.runtime.name, "the late Configure changed nothing")
}
