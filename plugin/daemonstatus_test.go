package plugin

import (
	"os"
	"testing"
	"time"

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
