package plugin

import (
	"context"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestALateSynchronizeChangesNothingOnTheWayOut: the runtime synchronizes
// the plugin right after Configure, on a connection Run gave up on the
// way out (a stuck handler let go late). Like a late Configure it must be
// refused: it would load the state, place and pin containers and write
// the state beside the way out's last write or after Close released the
// state directory to the next process.
func TestALateSynchronizeChangesNothingOnTheWayOut(t *testing.T) {
	p := newUnitPlugin(t, &failingStore{}, `isolatedCPUs: "4-7,12-15"`)
	require.NoError(t, p.onTheWayOut("the way out's first step", func() error { return nil }))
	pods := []*api.PodSandbox{{Id: "sb", Uid: "uid-a", Name: "a", Namespace: "ns"}}
	containers := []*api.Container{{Id: "c1", PodSandboxId: "sb", Name: "c", State: api.ContainerState_CONTAINER_RUNNING}}
	updates, err := p.Synchronize(context.Background(), pods, containers)
	require.ErrorIs(t, err, errStopping)
	assert.Empty(t, updates)
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.False(t, p.loaded, "the late Synchronize loaded the state")
	assert.False(t, p.synced, "the late Synchronize synchronized")
	_, placed := p.alloc.Get("c1")
	assert.False(t, placed, "the late Synchronize placed a container")
}
