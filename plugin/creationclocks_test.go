package plugin

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCreationClocksTimeEachPhase: with TimeCreations, each creation that
// is placed is timed through every phase (a creation whose goroutine
// changed thread is counted instead, and may be); a refused one is counted
// as incomplete, not timed. Without it nothing is kept.
func TestCreationClocksTimeEachPhase(t *testing.T) {
	f := newFakeRuntime(t, false)
	clocks := NewCreationClocks()
	startPluginWith(t, f, vm2, statePath(f), func(rp *runningPlugin) { rp.p.TimeCreations(clocks) })
	_, _, err := f.createContainer(exclusivePod(f, "a"), "c", 1000)
	require.NoError(t, err)
	for _, name := range []string{"s", "t"} {
		_, _, err := f.createContainer(f.runPod(podSpec{name: name}), "c", 500)
		require.NoError(t, err)
	}
	s := clocks.Summary(0)
	require.Equal(t, uint64(3), uint64(s.Calls)+s.ThreadChanged, "every placed creation is timed or counted")
	require.Positive(t, s.Calls)
	assert.Zero(t, s.Incomplete)
	var names []string
	var sum float64
	for _, ph := range s.Phases {
		names = append(names, ph.Name)
		if ph.Name != "total" {
			sum += ph.WallMeanUs
			assert.Positive(t, ph.WallMeanUs, "phase %s", ph.Name)
		}
	}
	assert.Equal(t, append(append([]string(nil), creationPhases...), "total"), names)
	assert.InDelta(t, s.Phases[len(s.Phases)-1].WallMeanUs, sum, 1e-6, "the phases add up to the whole")

	_, _, err = f.createContainer(f.runPod(podSpec{name: "bad", annotations: map[string]string{"pool.cpupool.dev": "turbo"}}), "c", 1000)
	require.Error(t, err)
	after := clocks.Summary(0)
	assert.Equal(t, s.Seq, after.Seq, "a refusal is not timed")
	assert.Equal(t, uint64(1), after.Incomplete+after.ThreadChanged-s.ThreadChanged)
}

// TestCreationClocksOffByDefault: a plugin not given a Recorder times
// nothing (its CreateContainer's marks are on a nil one).
func TestCreationClocksOffByDefault(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, vm2, statePath(f))
	_, _, err := f.createContainer(exclusivePod(f, "a"), "c", 1000)
	require.NoError(t, err)
	assert.Nil(t, rp.p.CreationClocks())
}

// TestTimeCreationsWhileCreating: the Recorder may be given while
// creations run (their first phase is timed before the lock): no data race
// (go test -race, as make test runs it: without -race this cannot fail),
// and each creation is timed by a Recorder or by none.
func TestTimeCreationsWhileCreating(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, vm2, statePath(f))
	clocks := NewCreationClocks()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				rp.p.TimeCreations(clocks)
				return
			default:
				rp.p.TimeCreations(clocks)
				rp.p.TimeCreations(nil)
			}
		}
	}()
	for i := range 20 {
		_, _, err := f.createContainer(f.runPod(podSpec{name: fmt.Sprintf("s%d", i)}), "c", 100)
		require.NoError(t, err)
	}
	close(stop)
	<-done
	assert.Same(t, clocks, rp.p.CreationClocks())
}
