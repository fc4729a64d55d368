package plugin

import (
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
)

// TestPushLeftPendingBeforeTheConnectionIsSentOnceItIs: a reload queued
// before the first Synchronize is applied in the background right after
// it, while the stub's Start may not have returned, so Run has not set the
// push yet: its updates were left pending for "the next reply", and on a
// quiet node none comes (the shared members stayed on the old pool; a 2%
// flake of TestReloadBeforeTheFirstSynchronizeThatMovesNobodyIsApplied).
// Setting the push sends what is pending.
func TestPushLeftPendingBeforeTheConnectionIsSentOnceItIs(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)

	rp.p.setPush(nil) // as between a Synchronize inside Start and Run's setPush
	rp.p.mu.Lock()
	rp.p.pending[fwd.Id] = true
	rp.p.mu.Unlock()
	require.Equal(t, 0, rp.p.pushNow([]string{fwd.Id}), "no push is set: nothing sent")

	sent := make(chan []*api.ContainerUpdate, 4)
	rp.p.setPush(func(u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		sent <- u
		return nil, nil
	})
	select {
	case u := <-sent:
		require.Len(t, u, 1)
		require.Equal(t, fwd.Id, u[0].GetContainerId())
	case <-time.After(3 * time.Second):
		t.Fatal("the update left pending before the push was set is never sent")
	}
	require.Eventually(t, func() bool {
		rp.p.mu.Lock()
		defer rp.p.mu.Unlock()
		return !rp.p.pending[fwd.Id]
	}, 3*time.Second, 10*time.Millisecond, "sent and current: no longer pending")
}
