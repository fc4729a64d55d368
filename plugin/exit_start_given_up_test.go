package plugin

import (
	"context"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/require"
)

// startLetThroughLate is a stub whose Start lets the runtime's Configure
// through only once its context has ended and released is closed: the
// stub's Start, given up by Run, goes on alone, and the runtime's
// Configure reaches the plugin whenever a stuck handler lets go.
type startLetThroughLate struct {
	stub.Stub
	p          *Plugin
	released   chan struct{}
	configured chan error
}

func (s *startLetThroughLate) Start(ctx context.Context) error {
	<-ctx.Done()
	<-s.released
	_, err := s.p.Configure(context.Background(), "", "containerd", "2.1")
	s.configured <- err
	return err
}

func (s *startLetThroughLate) Stop() {}

// TestAStartGivenUpLetsNoConfigureThrough: once start gives up the stub's
// Start (Run's context ended), Run returns and its way out begins; the
// guard against a late Configure was set only by the way out's first
// step, so a Configure let through in between (the stuck handler let go
// right then) loaded, reloaded or wrote state beside the way out. start
// sets the guard before it gives up.
func TestAStartGivenUpLetsNoConfigureThrough(t *testing.T) {
	p := newUnitPlugin(t, &failingStore{}, `isolatedCPUs: "4-7,12-15"`)
	s := &startLetThroughLate{p: p, released: make(chan struct{}), configured: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- p.start(ctx, s) }()
	cancel() // SIGTERM
	select {
	case err := <-started:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(3 * time.Second):
		t.Fatal("start did not give up when its context ended")
	}
	// Run has not reached its way out yet: the Configure comes now.
	close(s.released)
	require.ErrorIs(t, <-s.configured, errStopping, "a Configure let through after start gave up was applied")
	require.Empty(t, p.runtime.name, "the late Configure changed nothing")
	p.exit.late.Wait()
}
