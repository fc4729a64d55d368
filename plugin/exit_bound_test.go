package plugin

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunsExitIsBoundedWhileAHandlerHoldsTheLock: the daemon's way out is
// documented as bounded (docs/metrics.md), and Run wrapped its last Flush
// in a bound; but before it, Run recorded RuntimeStopped through
// noteStatus, which took the plugin's lock with no bound: with a handler
// stuck holding it (what CpupoolHandlerStuck is for) the daemon exited
// only by the SIGKILL at the end of the grace period. The status file
// must also say "stopped" while the lock is still held, so that
// `nri-cpupool status` does not take the exiting daemon for a running one.
func TestRunsExitIsBoundedWhileAHandlerHoldsTheLock(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startBoundedPlugin(t, f)
	rp.p.mu.Lock() // a handler stuck under the lock
	var (
		status DaemonStatus
		ok     bool
		err    error
	)
	requireRunExitsInTime(t, rp, func() {
		// Read while the lock is still held; the way out's last write,
		// which waited for the lock, is waited for after.
		status, ok, err = ReadDaemonStatus(DaemonStatusFile(statePath(f)))
		rp.p.mu.Unlock()
	}, " while the lock was held")
	require.NoError(t, err)
	require.True(t, ok, "no status file")
	require.NotNil(t, status.Runtime)
	assert.Equal(t, RuntimeStopped, status.Runtime.State, "the status file, written while the lock was still held")
}

// TestCloseIsBoundedWhileAHandlerHoldsTheLock: Close, the rest of the way
// out, took the plugin's lock with no bound too (stopping the sandbox
// pinner, the last write's collection, releasing the store).
func TestCloseIsBoundedWhileAHandlerHoldsTheLock(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startBoundedPlugin(t, f)
	rp.stop()
	rp.p.mu.Lock() // a handler stuck under the lock
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		rp.p.Close()
	}()
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		logRunsStack(t)
		rp.p.mu.Unlock()
		<-closed
		t.Fatalf("Close did not return within 3 s (closeWait 300 ms) while the lock was held")
	}
	rp.p.mu.Unlock()
	rp.p.exit.late.Wait()
}

// TestRunsExitAndCloseShareOneBound: Run's last flush waited up to
// closeWait (5 s) for a hung write, and Close then waited as long again:
// 10 s, the chart's terminationGracePeriodSeconds, so the kubelet's
// SIGKILL could land while the daemon was still in its bounded way out.
// The two now share one budget: Close gets what Run's exit left.
func TestRunsExitAndCloseShareOneBound(t *testing.T) {
	const bound = time.Second
	f := newFakeRuntime(t, false)
	store := &stallingStore{release: make(chan struct{})}
	rp := startPluginTuned(t, f, desktop, statePath(f), func(p *Plugin) {
		p.writer.closeWait = bound
		p.store = store // read by Configure, written from the first Synchronize on
	})
	var runErr error
	t.Cleanup(func() { // before the harness's stop, which flushes
		close(store.release)
		rp.p.exit.late.Wait()
		rp.done <- runErr
	})
	require.Eventually(t, func() bool { return rp.p.writer.busy.Load() != nil }, 5*time.Second, 5*time.Millisecond,
		"the first write after Synchronize hangs")
	start := time.Now()
	rp.cancel() // SIGTERM
	select {
	case runErr = <-rp.done:
	case <-time.After(5 * bound):
		logRunsStack(t)
		t.Fatalf("Run did not return within %s (closeWait %s) of its context's end", 5*bound, bound)
	}
	ranOut := time.Since(start)
	rp.p.Close()
	took := time.Since(start)
	t.Logf("Run's way out %s, with Close %s (bound %s)", ranOut.Round(time.Millisecond), took.Round(time.Millisecond), bound)
	assert.GreaterOrEqual(t, ranOut, bound-50*time.Millisecond, "Run's last flush is given the bound")
	assert.Less(t, took, bound*3/2, "Run's way out and Close wait for the hung write %s in all, not %s each", bound, bound)
}

// TestTheWayOutSpendsOneBudget: each step of the way out is waited for
// at most what the steps before it left of the bound; a step past it
// goes on alone.
func TestTheWayOutSpendsOneBudget(t *testing.T) {
	p := &Plugin{writer: &stateWriter{closeWait: 600 * time.Millisecond}}
	start := time.Now()
	require.NoError(t, p.onTheWayOut("a step", func() error { time.Sleep(200 * time.Millisecond); return nil }))
	stuck := make(chan struct{})
	err := p.onTheWayOut("a stuck step", func() error { <-stuck; return nil })
	took := time.Since(start)
	assert.ErrorIs(t, err, errExitBoundReached)
	assert.Contains(t, err.Error(), "a stuck step has not finished")
	assert.GreaterOrEqual(t, took, 600*time.Millisecond)
	assert.Less(t, took, 900*time.Millisecond, "the second step got what the first left, not the whole bound")
	stepErr := errors.New("failed")
	at := time.Now()
	err = p.onTheWayOut("a step after the bound", func() error { return stepErr })
	assert.ErrorIs(t, err, errExitBoundReached, "nothing is left: not waited for")
	assert.Less(t, time.Since(at), 100*time.Millisecond)
	close(stuck)
	p.exit.late.Wait()
}

// TestTheWayOutCountsTheStepsThatFinished: a step that finishes within
// the bound spends its time too. TestTheWayOutSpendsOneBudget cannot tell
// (its second step, given the whole bound, ends at 800 ms, under its 900
// ms limit): with the finished steps not counted, Run's flush, the DRA
// driver's wait and Close could each take nearly 5 s, past the grace
// period.
func TestTheWayOutCountsTheStepsThatFinished(t *testing.T) {
	p := &Plugin{writer: &stateWriter{closeWait: 600 * time.Millisecond}}
	require.NoError(t, p.onTheWayOut("a slow step", func() error { time.Sleep(400 * time.Millisecond); return nil }))
	stuck := make(chan struct{})
	at := time.Now()
	err := p.onTheWayOut("a stuck step", func() error { <-stuck; return nil })
	waited := time.Since(at)
	close(stuck)
	p.exit.late.Wait()
	require.ErrorIs(t, err, errExitBoundReached)
	require.Less(t, waited, 400*time.Millisecond, "the stuck step got what the first left (200 ms), not the whole bound (600 ms)")
}
