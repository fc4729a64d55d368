package plugin

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gauge reads one of the plugin's unlabelled gauges as a scrape would.
func gauge(t *testing.T, p *Plugin, name string) float64 {
	t.Helper()
	mfs, err := p.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			require.Len(t, mf.GetMetric(), 1)
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s is not exported", name)
	return 0
}

// TestRuntimeReadinessFollowsTheConnection: /readyz's runtime check (and
// cpupool_runtime_connected) passes only while the plugin is registered
// with the runtime and synchronized on that connection, and says what it
// waits for otherwise: before the first connection, while the runtime is
// away (a containerd restart), and after the daemon stopped (issue 43,
// item 4).
func TestRuntimeReadinessFollowsTheConnection(t *testing.T) {
	f := newFakeRuntime(t, false)
	var notYet error
	rp := startPluginWith(t, f, desktop, statePath(f), func(rp *runningPlugin) {
		notYet = rp.p.RuntimeReady()
		assert.Zero(t, gauge(t, rp.p, "cpupool_runtime_connected"))
	})
	require.Error(t, notYet, "Run has not started")
	assert.Contains(t, notYet.Error(), "not connected to the runtime yet")
	require.Eventually(t, func() bool { return rp.p.RuntimeReady() == nil }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1.0, gauge(t, rp.p, "cpupool_runtime_connected"))

	f.r.Stop()
	f.proxy.cut()
	os.Remove(f.runtimeSocket())
	// First "lost the connection", then, at the first retry, what it
	// waits for.
	require.Eventually(t, func() bool {
		err := rp.p.RuntimeReady()
		return err != nil && strings.Contains(err.Error(), "cannot reach the runtime at "+f.socket)
	}, 5*time.Second, 5*time.Millisecond)
	assert.Contains(t, rp.p.RuntimeReady().Error(), RuntimeWaiting+" since")
	assert.Zero(t, gauge(t, rp.p, "cpupool_runtime_connected"))

	before := f.syncCount()
	f.start()
	f.waitSynced(before)
	require.Eventually(t, func() bool { return rp.p.RuntimeReady() == nil }, 5*time.Second, 5*time.Millisecond)

	rp.p.noteRuntime(RuntimeStopped, f.socket, "")
	require.Error(t, rp.p.RuntimeReady())
	assert.Contains(t, rp.p.RuntimeReady().Error(), "stopped")
}

// TestRuntimeReadinessWaitsForThisConnectionsSynchronize: registered is not
// ready: the runtime synchronizes the plugin after registering it, and
// until then containers the runtime already runs are not reconciled. A
// Synchronize of an earlier connection does not count for a new one.
func TestRuntimeReadinessWaitsForThisConnectionsSynchronize(t *testing.T) {
	var c runtimeConn
	c.attempt.Store(1)
	c.now.Store(&RuntimeStatus{State: RuntimeRegistered, Socket: "/run/nri.sock"})
	err := c.ready()
	require.Error(t, err)
	assert.Equal(t, "registered with the runtime at /run/nri.sock, which has not synchronized the plugin yet", err.Error())

	c.synced.Store(1)
	require.NoError(t, c.ready())

	c.attempt.Store(2) // reconnected; its Synchronize has not come yet
	require.Error(t, c.ready())
	c.synced.Store(2)
	require.NoError(t, c.ready())
}

// TestStateWriterReadinessFollowsFailures: /readyz's state-writer check
// (and cpupool_state_write_failing) fails while the writer's writes fail,
// saying what fails, since when and how often, and passes again after the
// write that succeeds.
func TestStateWriterReadinessFollowsFailures(t *testing.T) {
	failing := true
	store := &recordingStore{fail: func(int) error {
		if failing {
			return errors.New("read-only file system")
		}
		return nil
	}}
	w, m := newTestWriter(t, store, func(w *stateWriter) {
		w.backoff = Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}
	})
	require.NoError(t, w.ready(), "nothing written yet is not a failure")
	m.change()
	require.Eventually(t, func() bool { return w.errors.Load() >= 2 }, 5*time.Second, time.Millisecond)
	err := w.ready()
	require.Error(t, err)
	assert.Regexp(t, `^writing state failing since \S+ \(\d+ attempts\): read-only file system$`, err.Error())

	store.mu.Lock()
	failing = false
	store.mu.Unlock()
	require.Eventually(t, func() bool { return w.ready() == nil }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []int{1}, store.written())
}

// TestStateWriterReadinessFollowsSyncFailures: an fsync that fails is a
// failing writer too, until an fsync succeeds; a write that succeeds in
// between does not hide it.
func TestStateWriterReadinessFollowsSyncFailures(t *testing.T) {
	store := &recordingStore{}
	w, m := newTestWriter(t, store, func(w *stateWriter) { w.syncEvery = time.Hour })
	store.mu.Lock()
	store.syncFail = errors.New("input/output error")
	store.mu.Unlock()
	m.change()
	require.Error(t, w.Flush())
	err := w.ready()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "syncing state to disk failing since")
	m.change()
	require.Eventually(t, func() bool { return w.onDisk.Load() == 2 }, 5*time.Second, time.Millisecond)
	require.Error(t, w.ready(), "the write succeeded, the fsync did not")

	store.mu.Lock()
	store.syncFail = nil
	store.mu.Unlock()
	require.NoError(t, w.Flush())
	require.NoError(t, w.ready())
}

// TestStateWriteFailingGauge: the plugin exports the writer's check as
// cpupool_state_write_failing.
func TestStateWriteFailingGauge(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	require.NoError(t, rp.p.StateWriterReady())
	assert.Zero(t, gauge(t, rp.p, "cpupool_state_write_failing"))
	// The start's own writes done first: one that succeeded after the
	// failure noted below would clear it (a flake on a loaded machine).
	require.NoError(t, rp.p.writer.Flush())
	noteFailure(&rp.p.writer.writeFailure, "writing state", errors.New("no space left on device"))
	assert.Equal(t, 1.0, gauge(t, rp.p, "cpupool_state_write_failing"))
	require.ErrorContains(t, rp.p.StateWriterReady(), "no space left on device")
	problems, err := testutil.CollectAndLint(rp.p.metrics, "cpupool_state_write_failing", "cpupool_runtime_connected")
	require.NoError(t, err)
	assert.Empty(t, problems)
}
