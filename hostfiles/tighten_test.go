package hostfiles

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tighteningSource is a fakeSource whose owner says when its wants grow
// stricter (Tightener): the IRQ source when a CPU is banned anew.
type tighteningSource struct {
	*fakeSource
	tight atomic.Bool
}

func (s *tighteningSource) Tightens() bool { return s.tight.Load() }

// TestATighterWantIsNotPutOffByALongPass: after a long pass, the next
// kicked one is spaced by BusyShare (here 2 s, BusyMax). A change that
// makes a want stricter (a new exclusive container's CPUs to keep IRQs
// off: until its pass, they still take device IRQs) is spaced by
// MinInterval alone: its pass starts well within a second, not when the
// spacing ends. A change that does not (a release, a shared container)
// keeps the spacing: passes stay within their share of the worker.
func TestATighterWantIsNotPutOffByALongPass(t *testing.T) {
	tr := newTree(t, map[string]string{"a": "x"})
	src := &tighteningSource{fakeSource: newSource("s")}
	in := openInstance(t, OS{}, tr, bootA, src)
	in.r.timing = Timing{Delay: time.Millisecond, MinInterval: 100 * time.Millisecond, Rescan: time.Hour,
		BackoffInitial: time.Second, BackoffMax: time.Second, BusyShare: 0.25, BusyMax: 2 * time.Second}
	src.set(map[string]string{tr.path("a"): "y"})
	in.r.Start()
	in.r.Kick()
	require.Eventually(t, func() bool { return tr.read(t, "a") == "y" }, 5*time.Second, time.Millisecond)

	// longPass makes a kicked pass that waits 0.6 s for the lock: the
	// next kicked one is spaced 2 s after it began.
	longPass := func() {
		passes := in.r.Status().Passes
		in.r.mu.Lock()
		in.r.Kick()
		time.Sleep(600 * time.Millisecond)
		in.r.mu.Unlock()
		require.Eventually(t, func() bool { return in.r.Status().Passes > passes }, 5*time.Second, time.Millisecond)
	}

	longPass()
	src.set(map[string]string{tr.path("a"): "z"})
	in.r.Kick()
	kicked := time.Now()
	require.Eventually(t, func() bool { return tr.read(t, "a") == "z" }, 5*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(kicked), time.Second, "a change that tightens nothing keeps the spacing")

	longPass()
	// A change that tightens nothing comes first; the stricter one during
	// its wait: the kick of the second wakes no one (the first's pass is
	// due), and its pass must not wait for the spacing all the same.
	src.set(map[string]string{tr.path("a"): "w"})
	in.r.Kick()
	time.Sleep(150 * time.Millisecond)
	src.tight.Store(true)
	src.set(map[string]string{tr.path("a"): "v"})
	in.r.Kick()
	kicked = time.Now()
	require.Eventually(t, func() bool { return tr.read(t, "a") == "v" }, 5*time.Second, time.Millisecond)
	assert.Less(t, time.Since(kicked), 700*time.Millisecond, "a stricter want waited for the spacing after a long pass")
}
