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
	// slow, when above 0, is how long its Plan takes: a long pass made
	// by the pass itself, whenever the worker runs it.
	slow atomic.Int64
}

func (s *tighteningSource) Tightens() bool { return s.tight.Load() }

func (s *tighteningSource) Plan() (Plan, error) {
	plan, err := s.fakeSource.Plan()
	time.Sleep(time.Duration(s.slow.Load()))
	return plan, err
}

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

	// longPass makes a kicked pass whose Plan takes 0.6 s: the next
	// kicked one is spaced 2 s after it began. The pass itself is long,
	// not a wait for the lock held from here, so that a worker scheduled
	// late on a loaded machine cannot make it short.
	longPass := func() {
		passes := in.r.Status().Passes
		src.slow.Store(int64(600 * time.Millisecond))
		in.r.Kick()
		require.Eventually(t, func() bool { return in.r.Status().Passes > passes }, 5*time.Second, time.Millisecond)
		src.slow.Store(0)
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
