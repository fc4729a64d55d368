package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAReconnectGivenUpOnTheWayOutIsNotConfiguredLater: the way out's
// guard against a late Configure is only as good as what sets it. The
// unit test of Configure sets exit.begun by hand, and the two bounded
// reconnect tests pass with onTheWayOut no longer setting it: nothing
// checked that the Configure a given-up Start lets through once the stuck
// handler lets go is refused. Here it must be: no "connected to" after
// the SIGTERM.
func TestAReconnectGivenUpOnTheWayOutIsNotConfiguredLater(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPluginTuned(t, f, desktop, statePath(f), func(p *Plugin) { p.writer.closeWait = 300 * time.Millisecond })
	rp.p.mu.Lock() // a handler stuck under the lock
	f.restart()    // the runtime drops the plugin; Run reconnects
	require.Eventually(t, func() bool { return runIsIn("plugin.(*Plugin).start(") }, 5*time.Second, 10*time.Millisecond, "Run reconnecting")
	time.Sleep(200 * time.Millisecond) // the runtime's Configure waits for the lock
	connectedBefore := strings.Count(rp.log.String(), "connected to ")
	rp.cancel() // SIGTERM
	runErr := <-rp.done
	rp.p.mu.Unlock() // the stuck handler lets go: the late Configure takes the lock
	rp.p.exit.late.Wait()
	rp.done <- runErr
	assert.Equal(t, connectedBefore, strings.Count(rp.log.String(), "connected to "),
		"a Configure that came after the way out began was applied:\n%s", rp.log.String())
}
