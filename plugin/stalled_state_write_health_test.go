package plugin

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
)

// stallingStore is a disk whose writes never return (a hung device, an
// NFS server gone): the write neither succeeds nor fails.
type stallingStore struct{ release chan struct{} }

func (s *stallingStore) Load() (*state.State, error) { return state.NewState(), nil }
func (s *stallingStore) Close()                      {}
func (s *stallingStore) Sync() error                 { return nil }
func (s *stallingStore) Save(*state.State) error     { <-s.release; return nil }

// TestAStateWriteThatNeverReturnsFailsReadinessAndTheFailingGauge: the
// state writer's health (/readyz's state-writer check,
// cpupool_state_write_failing and so CpupoolStateWriteFailing) was set
// only when a write or fsync returned an error. A write that hangs never
// returns one: decisions piled up unwritten (a restart would forget them)
// while every check said the writer was well. A write under way longer
// than stallAfter now counts as failing, and the writer's Close gives up
// on it after closeWait instead of waiting for ever.
func TestAStateWriteThatNeverReturnsFailsReadinessAndTheFailingGauge(t *testing.T) {
	store := &stallingStore{release: make(chan struct{})}
	p := newUnitPlugin(t, store, `isolatedCPUs: "4-7,12-15"`)
	released := false
	release := func() {
		if !released {
			released = true
			close(store.release)
		}
	}
	t.Cleanup(release) // before Close, which waits for the writer
	assert.Equal(t, stateWriteStallAfter, p.writer.stallAfter)
	p.writer.stallAfter = time.Second // set before the writer starts (Synchronize)
	p.writer.closeWait = 300 * time.Millisecond
	_, err := p.Synchronize(context.Background(), nil, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return gauge(t, p, "cpupool_state_behind_seconds") > 2 }, 10*time.Second, 50*time.Millisecond,
		"the first write after Synchronize hangs: the state falls behind")
	t.Logf("behind %.1f s: StateWriterReady=%v, cpupool_state_write_failing=%v", gauge(t, p, "cpupool_state_behind_seconds"), p.StateWriterReady(), gauge(t, p, "cpupool_state_write_failing"))
	require.Error(t, p.StateWriterReady(), "a state write stuck for seconds: /readyz must fail")
	assert.Contains(t, p.StateWriterReady().Error(), "writing state has not returned for")
	assert.Equal(t, 1.0, gauge(t, p, "cpupool_state_write_failing"))

	start := time.Now()
	err = p.writer.Close()
	assert.ErrorIs(t, err, errStateWriteStalled)
	assert.Less(t, time.Since(start), 5*time.Second, "Close waits closeWait for the hung write, not for ever")

	release()
	assert.Eventually(t, func() bool { return p.StateWriterReady() == nil }, 5*time.Second, 10*time.Millisecond,
		"the write returned: the writer is well again")
}
