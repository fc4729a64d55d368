package plugin

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunsExitIsBoundedWhenAHandlerHoldsTheLockAsRunStarts: Run read the
// plugin index under the plugin's lock before its first connection. A
// handler holding the lock then (a reload from the watched file, the DRA
// driver, the device plugin, all served before the runtime connects) and
// hanging kept Run there: its context's end never reached the bounded way
// out, and the daemon died only by the SIGKILL.
func TestRunsExitIsBoundedWhenAHandlerHoldsTheLockAsRunStarts(t *testing.T) {
	p := newUnitPlugin(t, &failingStore{}, `isolatedCPUs: "4-7,12-15"`)
	boundExit(p)
	p.hotplug.uevents = make(chan cpuUevent) // not the host's
	p.mu.Lock()                              // a handler stuck under the lock
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// No runtime at the socket: Run retries until its context ends.
	socket := filepath.Join(t.TempDir(), "nri.sock")
	go func() {
		done <- p.Run(ctx, socket, Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond})
	}()
	time.Sleep(100 * time.Millisecond)
	err := requireExitInTime(t, p, cancel, done, p.mu.Unlock, ": a handler held the lock as Run started")
	require.NoError(t, err)
}
