package plugin

import (
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
)

// TestNoPendingUpdateIsSentOnceTheWayOutHasBegun: the updates left
// pending for a new connection are sent from the background once the
// plugin's lock is free (Run must not wait for it). A connection that
// registers as the way out begins, a stuck handler letting go only then:
// the runtime is being left, and nothing is sent to it.
func TestNoPendingUpdateIsSentOnceTheWayOutHasBegun(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)

	rp.p.setPush(nil)
	rp.p.mu.Lock() // a handler stuck under the lock
	rp.p.pending[fwd.Id] = true
	sent := make(chan []*api.ContainerUpdate, 4)
	rp.p.setPush(func(u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		sent <- u
		return nil, nil
	})
	rp.p.exit.begun.Store(true) // the way out begins
	rp.p.mu.Unlock()            // the handler lets go
	select {
	case u := <-sent:
		t.Fatalf("%d updates sent to the runtime after the way out began", len(u))
	case <-time.After(300 * time.Millisecond):
	}
	rp.p.setPush(nil)
}

// TestAPendingUpdateIsSentOnceWhenTheRuntimeReconnectsWhileTheLockIsHeld:
// setPush sends what is pending from a goroutine that waits for the
// plugin's lock. The runtime drops the plugin while a handler holds the
// lock (what its request timeout does to a stuck handler) and Run
// reconnects: each registration's goroutine waits. Once the lock is free,
// only the current connection's goroutine may send the pending updates;
// before, each one sent them on the new connection, so the runtime got
// the same updates twice.
func TestAPendingUpdateIsSentOnceWhenTheRuntimeReconnectsWhileTheLockIsHeld(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)

	rp.p.setPush(nil)
	rp.p.mu.Lock() // a handler stuck under the lock
	rp.p.pending[fwd.Id] = true
	dropped := func([]*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	rp.p.setPush(dropped) // the first registration; the runtime then drops the plugin
	rp.p.setPush(nil)
	sent := make(chan []*api.ContainerUpdate, 8)
	rp.p.setPush(func(u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { // the reconnect
		sent <- u
		return nil, nil
	})
	time.Sleep(50 * time.Millisecond) // both registrations' goroutines wait for the lock
	rp.p.mu.Unlock()                  // the handler lets go
	n := 0
	deadline := time.After(500 * time.Millisecond)
	for done := false; !done; {
		select {
		case <-sent:
			n++
		case <-deadline:
			done = true
		}
	}
	rp.p.setPush(nil)
	require.Equal(t, 1, n, "the update left pending was sent %d times on the new connection", n)
}
