package plugin

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The runtime gives up on the plugin's Configure (over real ttRPC: a
// restarted runtime whose Configure the plugin answers past the runtime's
// 2 s request timeout, as when a handler holds the plugin's lock; the
// runtime logs "failed to start external plugin: failed to configure
// plugin: context deadline exceeded" and closes the connection).
// docs/install.md: the plugin reconnects with backoff and is
// resynchronized, so systemd need not restart it. It must come back by
// itself, keep its state (the running container stays where it runs, the
// state file keeps it, nothing is placed anew or confined).
func TestAConfigureTheRuntimeGaveUpOnIsRetriedWithoutLosingState(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	fwd, _, _ := populate(t, f)
	require.NoError(t, rp.p.Flush())
	require.Equal(t, "4,12", f.cpus(fwd))

	rp.p.mu.Lock() // a handler slow under the lock, past the runtime's request timeout
	var unlock sync.Once
	release := func() { unlock.Do(rp.p.mu.Unlock) }
	t.Cleanup(release)
	f.restart()                 // the runtime drops the plugin; its new Configure waits for the lock
	time.Sleep(3 * time.Second) // the runtime gave up on the Configure
	before := f.syncCount()
	release()
	require.Eventually(t, func() bool { return f.syncCount() > before }, 10*time.Second, 20*time.Millisecond,
		"the plugin registers again and is synchronized:\n%s", rp.log.String())
	log := rp.log.String()
	t.Logf("log:\n%s", grepLog(log, "runtime"))
	assert.Contains(t, log, "synchronized: 3 containers kept, 0 re-pinned, 0 placed, 0 confined, 0 forgotten")
	assert.Equal(t, "4,12", f.cpus(fwd), "not moved")
	require.NoError(t, rp.p.Flush())
	st := rp.savedState(t)
	assert.Contains(t, st.Containers, fwd.Id, "the state keeps the container")
	pod := f.runPod(podSpec{name: "after", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	c, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err, "the plugin serves the runtime again")
	assert.True(t, mustParse(f.cpus(c)).Intersection(mustParse("4,12")).IsEmpty())
}
