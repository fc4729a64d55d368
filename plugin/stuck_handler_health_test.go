package plugin

import (
	"context"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAHandlerStuckPastTheRuntimeTimeoutFailsReadiness: a CreateContainer
// that cannot get the plugin's lock (a hung host write under it, a bug)
// is answered by nothing: the runtime gives up at its request timeout
// (2 s), drops the plugin and creates the container unpinned. The
// connection's loss must reach /readyz and cpupool_runtime_connected
// although the lock is still held (noteRuntime took it before it told
// readiness), and the stuck handler must show in
// cpupool_handler_oldest_inflight_seconds (the histogram sees a handler
// only when it returns).
func TestAHandlerStuckPastTheRuntimeTimeoutFailsReadiness(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	require.Eventually(t, func() bool { return rp.p.RuntimeReady() == nil }, 5*time.Second, 5*time.Millisecond)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})

	rp.p.mu.Lock() // the plugin's lock is stuck
	unlocked := false
	t.Cleanup(func() {
		if !unlocked {
			rp.p.mu.Unlock()
		}
	})
	done := make(chan error, 1)
	go func() { _, _, err := f.createContainer(pod, "fwd", 1000); done <- err }()
	time.Sleep(api.DefaultPluginRequestTimeout + 2*time.Second) // past the runtime's timeout
	ready := rp.p.RuntimeReady()
	connected := gauge(t, rp.p, "cpupool_runtime_connected")
	inflight := gauge(t, rp.p, "cpupool_handler_oldest_inflight_seconds")
	conn := rp.p.conn.now.Load().State
	t.Logf("stuck: RuntimeReady=%v connected=%v oldest in flight=%.1f s", ready, connected, inflight)
	unlocked = true
	rp.p.mu.Unlock()
	select {
	case err := <-done:
		t.Logf("the runtime's CreateContainer returned: %v", err)
	case <-time.After(10 * time.Second):
	}
	require.Error(t, ready, "a handler stuck past the runtime's timeout: /readyz must fail")
	assert.Zero(t, connected, "cpupool_runtime_connected")
	assert.Equal(t, RuntimeWaiting, conn, "the runtime dropped the plugin: readiness must know while the lock is held")
	assert.Greater(t, inflight, api.DefaultPluginRequestTimeout.Seconds(), "cpupool_handler_oldest_inflight_seconds")
	assert.Eventually(t, func() bool { return gauge(t, rp.p, "cpupool_handler_oldest_inflight_seconds") == 0 }, 5*time.Second, 10*time.Millisecond,
		"the handler returned once the lock was free: nothing is under way")
}

// TestAHandlerUnderWayPastTheRequestTimeoutFailsReadinessWhileConnected:
// a runtime that keeps a plugin connected after a timeout (NRI's
// keepConnected policy), or one whose timeout is longer, does not drop
// the connection; readiness then fails on the handler itself, once it
// has been under way longer than the runtime's timeout, and passes again
// when it returns. The timeout is the runtime's (as its Configure said),
// NRI's default before that.
func TestAHandlerUnderWayPastTheRequestTimeoutFailsReadinessWhileConnected(t *testing.T) {
	require.LessOrEqual(t, len(handlerNames), 16, "a slot keeps a handler's index in 4 bits")
	p := newUnitPlugin(t, &failingStore{}, `isolatedCPUs: "4-7,12-15"`)
	_, err := p.Synchronize(context.Background(), nil, nil)
	require.NoError(t, err)
	p.conn.attempt.Store(1)
	p.conn.synced.Store(1)
	p.conn.now.Store(&RuntimeStatus{State: RuntimeRegistered, Socket: "/run/nri.sock"})
	require.NoError(t, p.RuntimeReady())
	assert.Equal(t, api.DefaultPluginRequestTimeout, p.conn.timeout(), "before Configure told another")
	p.conn.requestTimeout.Store(int64(300 * time.Millisecond)) // what the runtime's Configure said

	in := newInstrumented(p)
	pod := &api.PodSandbox{Id: "pod", Name: "web", Namespace: "default", Uid: "uid"}
	ctr := &api.Container{Id: "ctr", PodSandboxId: "pod", Name: "app", Linux: &api.LinuxContainer{}}
	p.mu.Lock()
	locked := true
	t.Cleanup(func() {
		if locked {
			p.mu.Unlock()
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		in.CreateContainer(context.Background(), pod, ctr) //nolint:errcheck // its answer is not what is tested
	}()
	time.Sleep(100 * time.Millisecond)
	assert.NoError(t, p.RuntimeReady(), "under way, but within the runtime's timeout")
	require.Eventually(t, func() bool { return p.RuntimeReady() != nil }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, p.RuntimeReady().Error(), "the CreateContainer handler has not answered for")
	assert.Contains(t, p.RuntimeReady().Error(), "past the runtime's request timeout of 300ms")
	assert.Zero(t, gauge(t, p, "cpupool_runtime_connected"))
	assert.Greater(t, gauge(t, p, "cpupool_handler_oldest_inflight_seconds"), 0.3)
	locked = false
	p.mu.Unlock()
	<-done
	assert.NoError(t, p.RuntimeReady(), "the handler answered")
	assert.Zero(t, gauge(t, p, "cpupool_handler_oldest_inflight_seconds"))
}

// TestHandlersInFlightReportsTheOldest: with several handlers under way the
// oldest counts, and one leaving frees its slot for the next; a handler
// that finds no slot is not followed, and its leave is harmless.
func TestHandlersInFlightReportsTheOldest(t *testing.T) {
	var h handlersInFlight
	now := time.Now()
	a := h.enter(now.Add(-3*time.Second), 6) // CreateContainer
	b := h.enter(now.Add(-time.Second), 1)   // Synchronize
	age, name := h.oldest()
	assert.InDelta(t, 3, age.Seconds(), 0.5)
	assert.Equal(t, "CreateContainer", name)
	h.leave(a)
	age, name = h.oldest()
	assert.InDelta(t, 1, age.Seconds(), 0.5)
	assert.Equal(t, "Synchronize", name)
	h.leave(b)
	age, name = h.oldest()
	assert.Zero(t, age)
	assert.Empty(t, name)
	for range len(h.slots) {
		require.GreaterOrEqual(t, h.enter(now, 0), 0)
	}
	full := h.enter(now, 0)
	assert.Equal(t, -1, full)
	h.leave(full)
}
