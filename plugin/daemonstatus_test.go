package plugin

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDaemonStatusFollowsTheRuntimeConnection: beside the state file, the
// daemon says whether it is registered with the runtime or waits for it,
// and that it stopped, so that `nri-cpupool status` can tell a missing
// state file of a daemon that waits for the runtime from one of a daemon
// that does not run (issue 43, item 5).
func TestDaemonStatusFollowsTheRuntimeConnection(t *testing.T) {
	f := newFakeRuntime(t, false)
	stateFile := statePath(f)
	rp := startPlugin(t, f, desktop, stateFile)
	runtimeIs := func(want string) *RuntimeStatus {
		t.Helper()
		var got *RuntimeStatus
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			ds, ok, err := ReadDaemonStatus(DaemonStatusFile(stateFile))
			require.NoError(c, err)
			require.True(c, ok)
			require.NotNil(c, ds.Runtime)
			assert.Equal(c, want, ds.Runtime.State)
			got = ds.Runtime
		}, 5*time.Second, 5*time.Millisecond)
		return got
	}
	r := runtimeIs(RuntimeRegistered)
	assert.Equal(t, os.Getpid(), r.PID)
	assert.Equal(t, f.socket, r.Socket)

	f.r.Stop()
	f.proxy.cut()
	os.Remove(f.runtimeSocket())
	r = runtimeIs(RuntimeWaiting)
	assert.NotEmpty(t, r.Detail, "why it waits")

	before := f.syncCount()
	f.start()
	f.waitSynced(before)
	runtimeIs(RuntimeRegistered)

	rp.stop()
	runtimeIs(RuntimeStopped)
}

// TestCloseLeavesNoLateStatusWrite: a reload through Configure whose
// members' update the runtime has not answered yet is measured in the
// background (reloadDone waits for the answer, then writes the daemon's
// status). Close releases the state directory's lock for the next
// process: no write of this one may land after it.
func TestCloseLeavesNoLateStatusWrite(t *testing.T) {
	f, rp, _ := runDesktop(t)
	send := rp.p.push.Load()
	require.NotNil(t, send)
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	rp.p.setPush(func(u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		entered <- struct{}{}
		<-gate
		return (*send)(u)
	})
	_, err := rp.p.Configure(context.Background(), desktopGrown, "fake-runtime", "v0")
	require.NoError(t, err)
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the reload pushed nothing")
	}
	rp.stop()
	rp.p.Close()
	status := DaemonStatusFile(statePath(f))
	require.NoError(t, os.Remove(status)) // as the next process's would be, replaced
	close(gate)
	time.Sleep(500 * time.Millisecond)
	_, err = os.Stat(status)
	assert.ErrorIs(t, err, os.ErrNotExist, "written after Close")
}
