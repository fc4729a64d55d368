package plugin

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// The exit-bound tests hang something Run or Close needs (the plugin's
// lock, the status file's lock, a write), end Run's context as a SIGTERM
// does, and require the way out to end within its bound all the same.

// exitBound is the way out's bound (the state writer's closeWait) in these
// tests; they give Run and Close 3 s, ten times as much, to return.
const exitBound = 300 * time.Millisecond

// boundExit gives the plugin's way out the tests' bound.
func boundExit(p *Plugin) { p.writer.closeWait = exitBound }

// startBoundedPlugin starts a plugin on the desktop node whose way out is
// bounded by exitBound.
func startBoundedPlugin(t *testing.T, f *fakeRuntime) *runningPlugin {
	t.Helper()
	return startPluginTuned(t, f, desktop, statePath(f), boundExit)
}

// requireRunExitsInTime ends the running plugin's Run (a SIGTERM) and
// requires it to return within 3 s; then, as requireExitInTime, it gives
// Run's result back for the harness's stop.
func requireRunExitsInTime(t *testing.T, rp *runningPlugin, release func(), failure string) error {
	t.Helper()
	return requireExitInTime(t, rp.p, rp.cancel, rp.done, release, failure)
}

// requireExitInTime cancels Run's context (a SIGTERM) and waits 3 s for
// Run to return on done. release lets go of what the test hung: it runs
// once Run has returned, or once the 3 s have passed (Run's stack is
// logged then, and Run waited for after it). The way out's late steps are
// waited for, and Run's result is put back on done (the harness's stop
// reads it) and returned. If Run did not return in time the test fails,
// with "Run did not return within 3 s of its context's end (closeWait 300
// ms)" and failure, once everything is released.
func requireExitInTime(t *testing.T, p *Plugin, cancel func(), done chan error, release func(), failure string) error {
	t.Helper()
	cancel() // SIGTERM
	var runErr error
	inTime := true
	select {
	case runErr = <-done:
	case <-time.After(3 * time.Second):
		inTime = false
		logRunsStack(t)
	}
	release()
	if !inTime {
		runErr = <-done
	}
	p.exit.late.Wait()
	done <- runErr
	if !inTime {
		t.Fatalf("Run did not return within 3 s of its context's end (closeWait 300 ms)%s", failure)
	}
	return runErr
}

// runIsReconnecting tells whether Run is reconnecting now: in
// setNRIVersion or the stub's Start, or in Plugin.start waiting for it.
func runIsReconnecting() bool {
	return runIsIn("plugin.(*Plugin).setNRIVersion") || runIsIn("stub.(*stub).Start") || runIsIn("plugin.(*Plugin).start(")
}

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

// logRunsStack logs the goroutine of Run, to show where its way out hangs.
func logRunsStack(t *testing.T) {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "plugin.(*Plugin).Run") || strings.Contains(g, "plugin.(*Plugin).Close") {
			t.Logf("%s", g)
		}
	}
}
