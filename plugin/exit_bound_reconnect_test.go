package plugin

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runIsIn tells whether Run's goroutine is in fn now (Run reconnects:
// setNRIVersion or the stub's Start, or Plugin.start waiting for it).
func runIsIn(fn string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "plugin.(*Plugin).Run(") && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}

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
	rp := startPluginTuned(t, f, desktop, statePath(f), func(p *Plugin) { p.writer.closeWait = 300 * time.Millisecond })
	rp.p.mu.Lock() // a handler stuck under the lock
	f.restart()    // the runtime drops the plugin; Run reconnects
	require.Eventually(t, func() bool {
		return runIsIn("plugin.(*Plugin).setNRIVersion") || runIsIn("stub.(*stub).Start") || runIsIn("plugin.(*Plugin).start(")
	}, 5*time.Second, 10*time.Millisecond, "Run reconnecting")
	rp.cancel() // SIGTERM
	var runErr error
	select {
	case runErr = <-rp.done:
		rp.p.mu.Unlock()
	case <-time.After(3 * time.Second):
		logRunsStack(t)
		rp.p.mu.Unlock()
		runErr = <-rp.done
		rp.p.exit.late.Wait()
		rp.done <- runErr // for the harness's stop
		t.Fatalf("Run did not return within 3 s of its context's end (closeWait 300 ms) while reconnecting under a held lock")
	}
	rp.p.exit.late.Wait()
	rp.done <- runErr
}

// TestRunsExitIsBoundedAfterTheRuntimeDropsAStuckPlugin: the same with
// nothing but the stuck handler. A creation waits for the held lock; the
// runtime's request timeout (2 s) passes and it closes the plugin's
// connection (NRI's adaptation does so on DeadlineExceeded); Run
// reconnects and waits for the lock. This is where a daemon whose
// CpupoolHandlerStuck fires is when the kubelet or systemd stops it.
func TestRunsExitIsBoundedAfterTheRuntimeDropsAStuckPlugin(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPluginTuned(t, f, desktop, statePath(f), func(p *Plugin) { p.writer.closeWait = 300 * time.Millisecond })
	pod := f.runPod(podSpec{name: "stuck"})
	rp.p.mu.Lock() // a handler stuck under the lock
	created := make(chan struct{})
	go func() {
		defer close(created)
		f.createContainer(pod, "c", 1000) //nolint:errcheck // times out
	}()
	require.Eventually(t, func() bool {
		return runIsIn("plugin.(*Plugin).setNRIVersion") || runIsIn("stub.(*stub).Start") || runIsIn("plugin.(*Plugin).start(")
	}, 10*time.Second, 20*time.Millisecond, "the runtime drops the stuck plugin and Run reconnects")
	rp.cancel() // SIGTERM
	var runErr error
	select {
	case runErr = <-rp.done:
		rp.p.mu.Unlock()
	case <-time.After(3 * time.Second):
		logRunsStack(t)
		rp.p.mu.Unlock()
		runErr = <-rp.done
		<-created
		rp.p.exit.late.Wait()
		rp.done <- runErr
		t.Fatalf("Run did not return within 3 s of its context's end (closeWait 300 ms) after the runtime dropped the stuck plugin")
	}
	<-created
	rp.p.exit.late.Wait()
	rp.done <- runErr
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
