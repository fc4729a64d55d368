package plugin

import (
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
)

// crash stops the writer as kill -9 would stop the process: whatever it
// has not written stays unwritten, and it never writes again.
func (w *stateWriter) crash() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.halt()
}

// recordingStore records the generation of every state it is given (the
// fake memory puts it in Pools["gen"]); fail decides whether a save fails.
type recordingStore struct {
	mu    sync.Mutex
	gens  []int
	syncs int
	slow  time.Duration
	fail  func(attempt int) error
	tries int
	// syncFail, when set, is what Sync returns.
	syncFail error
}

func (s *recordingStore) Load() (*state.State, error) { return state.NewState(), nil }
func (s *recordingStore) Close()                      {}

func (s *recordingStore) Save(st *state.State) error {
	if s.slow > 0 {
		time.Sleep(time.Duration(rand.Int64N(int64(s.slow))))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.fail != nil {
		if err := s.fail(s.tries); err != nil {
			return err
		}
	}
	gen, _ := strconv.Atoi(st.Pools["gen"])
	s.gens = append(s.gens, gen)
	return nil
}

func (s *recordingStore) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.syncFail != nil {
		return s.syncFail
	}
	s.syncs++
	return nil
}

func (s *recordingStore) written() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.gens...)
}

func (s *recordingStore) last() int {
	g := s.written()
	if len(g) == 0 {
		return 0
	}
	return g[len(g)-1]
}

// fakeMemory plays the plugin: changes under its lock, and the writer's
// collect copies the generation into the mirror.
type fakeMemory struct {
	mu  sync.Mutex
	gen uint64
	w   *stateWriter
}

func (m *fakeMemory) change() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	m.w.changed(m.gen)
}

func (m *fakeMemory) collect(st *state.State, _ *grantsSnapshot) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	st.Pools["gen"] = strconv.FormatUint(m.gen, 10)
	return m.gen
}

// newTestWriter starts a writer over store; tune adjusts its timing
// before it starts.
func newTestWriter(t *testing.T, store state.Store, tune ...func(*stateWriter)) (*stateWriter, *fakeMemory) {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	m := &fakeMemory{}
	m.w = newStateWriter(log, m.collect)
	for _, f := range tune {
		f(m.w)
	}
	m.w.start(store, nil)
	t.Cleanup(m.w.crash)
	return m.w, m
}

func TestStateWriterCoalescesBursts(t *testing.T) {
	store := &recordingStore{}
	_, m := newTestWriter(t, store)
	// 1,000 changes over about half a second, as a burst of creations
	// through the runtime would come.
	for i := 0; i < 1000; i++ {
		m.change()
		if i%10 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	require.Eventually(t, func() bool { return store.last() == 1000 }, 5*time.Second, time.Millisecond, "the last change is written")
	writes := len(store.written())
	assert.LessOrEqual(t, writes, 100, "at most one write per 10 changes")
	assert.GreaterOrEqual(t, writes, 2, "a burst of half a second is not held back until the end")
	time.Sleep(3 * stateWriteInterval)
	assert.Len(t, store.written(), writes, "nothing is written when nothing changed")
}

func TestStateWriterNeverWritesOlderOverNewer(t *testing.T) {
	store := &recordingStore{slow: 2 * time.Millisecond}
	w, m := newTestWriter(t, store, func(w *stateWriter) { w.delay, w.minInterval = 0, 0 }) // write as often as possible
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				m.change()
				if i%7 == 0 {
					assert.NoError(t, w.Flush(), "a flush races with the writer and the other flushes")
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, w.Flush())
	gens := store.written()
	require.NotEmpty(t, gens)
	for i := 1; i < len(gens); i++ {
		require.Greater(t, gens[i], gens[i-1], "write %d carries generation %d after %d: %v", i, gens[i], gens[i-1], gens)
	}
	assert.Equal(t, 400, gens[len(gens)-1], "the last write is the newest state")
}

func TestStateWriterFlushesOnClose(t *testing.T) {
	store := &recordingStore{}
	w, m := newTestWriter(t, store, func(w *stateWriter) { w.delay = time.Hour }) // the writer itself would not write for an hour
	for i := 0; i < 5; i++ {
		m.change()
	}
	time.Sleep(10 * time.Millisecond)
	assert.Empty(t, store.written(), "no write yet")
	require.NoError(t, w.Close())
	assert.Equal(t, []int{5}, store.written(), "Close writes the newest state once")
	assert.Equal(t, 1, store.syncs, "and makes it durable")
	m.change()
	require.NoError(t, w.Flush())
	assert.Equal(t, []int{5}, store.written(), "nothing is written after Close")
}

func TestStateWriterSyncsOnATimerOnlyAfterWrites(t *testing.T) {
	store := &recordingStore{}
	w, m := newTestWriter(t, store)
	require.NoError(t, w.sync())
	assert.Zero(t, store.syncs, "nothing written, nothing to sync")
	m.change()
	require.Eventually(t, func() bool { return store.last() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, w.sync())
	require.NoError(t, w.sync())
	assert.Equal(t, 1, store.syncs, "one sync per batch of writes")
}

func TestStateWriterRetriesFailedWrites(t *testing.T) {
	store := &recordingStore{fail: func(attempt int) error {
		if attempt <= 3 {
			return errors.New("disk full")
		}
		return nil
	}}
	w, m := newTestWriter(t, store)
	m.change()
	require.Eventually(t, func() bool { return w.errors.Load() >= 1 }, 5*time.Second, time.Millisecond)
	assert.Empty(t, store.written())
	assert.Positive(t, w.behind(), "memory is ahead of the file")
	m.change() // a change while failing is in the retry's write
	require.Eventually(t, func() bool { return w.onDisk.Load() == 2 }, 10*time.Second, time.Millisecond, "retried until it succeeds")
	assert.Equal(t, uint64(3), w.errors.Load(), "each failed attempt is counted")
	assert.Equal(t, []int{2}, store.written())
	assert.Zero(t, w.behind(), "in sync again")
	store.mu.Lock()
	tries := store.tries
	store.mu.Unlock()
	assert.Equal(t, 4, tries, "retries stop after the success")
}

func TestStateWriterBacksOff(t *testing.T) {
	store := &recordingStore{fail: func(int) error { return errors.New("read-only file system") }}
	w, m := newTestWriter(t, store, func(w *stateWriter) {
		w.backoff = Backoff{Initial: 20 * time.Millisecond, Max: 80 * time.Millisecond}
	})
	m.change()
	time.Sleep(500 * time.Millisecond)
	// Without backoff a failing disk would be hit thousands of times;
	// with it, about 20 ms + 40 ms + 80 ms + 80 ms ... in half a second.
	n := w.errors.Load()
	assert.GreaterOrEqual(t, n, uint64(3), "retried")
	assert.LessOrEqual(t, n, uint64(10), "with backoff")
}
