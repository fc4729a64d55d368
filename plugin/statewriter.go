package plugin

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/state"
)

// stateWriter persists the state in the background, so that no handler
// waits for the disk: a handler changes memory, bumps the generation and
// replies; the writer copies what changed and writes it. The kubelet
// grants, which live in a file of their own, are collected with the state
// and written after it by the same writer, under the same guarantees.
//
// Guarantees:
//   - One goroutine writes, and each write takes its copy and writes it
//     under mu, so writes reach the store in generation order: an older
//     state never replaces a newer one.
//   - Bursts coalesce: a write starts at least delay after the first change
//     and at least minInterval after the previous write started; every
//     change made before a write takes its copy is in that write.
//   - A failed write (of either file) is logged, counted and retried with
//     backoff; the next successful write carries every change since the
//     last one.
//   - Nothing is fsynced per write (a crashed process loses nothing the
//     kernel has); the store and the grants file are synced every
//     syncEvery while they have unsynced writes, and on Flush and Close.
type stateWriter struct {
	store state.Store
	// grants is the kubelet grants file, nil when there is none (tests of
	// the writer alone). Grant writes it too; grantsFile orders the two.
	grants *grantsFile
	log    *logrus.Logger
	// collect brings the mirrors up to date with the plugin's memory, under
	// the plugin's lock, and returns the generation the mirror now holds
	// (a change to the grants is a change of that generation too).
	collect func(mirror *state.State, grants *grantsSnapshot) uint64

	delay, minInterval, syncEvery time.Duration
	backoff                       Backoff

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex   // held for a whole write: one write at a time, in order
	mirror  *state.State // the writer's own copy, read by the store outside the plugin's lock
	written uint64       // generation of the last successful write (of both files)
	synced  uint64       // generation of the last successful sync
	stopped bool         // no write after Close (or a simulated crash)
	failing int          // failed attempts since the last successful write
	// grantsMirror is the writer's copy of the grants, replaced by collect
	// when they changed; saved is the generation of the last state the
	// store saved (ahead of written while the grants fail to write).
	grantsMirror grantsSnapshot
	saved        uint64

	// due is set while a write is scheduled and has not collected yet: a
	// change then needs no kick (waking the writer costs a handler more
	// than its decision). It is cleared before the write collects, under
	// the plugin's lock, so a change that skipped the kick is collected.
	due atomic.Bool

	// Read by metrics without mu (a write may hold mu for long).
	want        atomic.Uint64 // newest generation in memory
	onDisk      atomic.Uint64 // generation of the last successful write
	writes      atomic.Uint64
	errors      atomic.Uint64
	lastWrite   atomic.Int64 // unix nanoseconds of the last successful write; 0 before
	behindSince atomic.Int64 // unix nanoseconds of the oldest change not on disk; 0 when in sync
	started     time.Time
	// writeFailure and syncFailure are the failing write and sync, nil
	// once one succeeds again (health.go: /readyz and
	// cpupool_state_write_failing).
	writeFailure, syncFailure atomic.Pointer[writerFailure]
	// busy is the write or sync under way, nil between them: one that has
	// not returned for stallAfter counts as failing (a hung disk or NFS
	// server neither succeeds nor fails).
	busy       atomic.Pointer[writerBusy]
	stallAfter time.Duration
	// closeWait bounds Close's wait for a write that does not return,
	// and the daemon's whole way out (exitbudget.go): Run's last flush
	// and the plugin's Close share it.
	closeWait time.Duration
	// durations times each write (store.Save: encode, write, rename) and
	// sync (fsync of the file and its directory); safe without mu.
	durations *prometheus.HistogramVec
}

// Default writer timing: the first change after a quiet period is on disk
// within a few milliseconds; a burst causes at most one write per 25 ms.
const (
	stateWriteDelay    = 2 * time.Millisecond
	stateWriteInterval = 25 * time.Millisecond
	stateSyncEvery     = 5 * time.Second
	// stateWriteStallAfter: a write (encode, write, rename; milliseconds)
	// or a sync (fdatasync and the directory's fsync; seconds at worst on
	// a loaded disk) under way this long has stalled: the writer counts
	// as failing (/readyz, cpupool_state_write_failing) until it returns.
	// Twice the sync period: a healthy disk never comes near it.
	stateWriteStallAfter = 10 * time.Second
	// stateCloseWait bounds the daemon's way out as a whole (Run's last
	// status and flush, the DRA driver's last write, Close; see
	// exitbudget.go), well below the chart's grace period of 10 s before
	// the kubelet's SIGKILL; and so the writer's Close's wait for a write
	// or sync that does not return (see stateWriter.Close).
	stateCloseWait = 5 * time.Second
)

var stateWriteBackoff = Backoff{Initial: 50 * time.Millisecond, Max: 5 * time.Second}

func newStateWriter(log *logrus.Logger, collect func(*state.State, *grantsSnapshot) uint64) *stateWriter {
	// collect changes the mirror's containers through its setters only:
	// the store encodes the changed ones alone.
	mirror := state.NewState()
	mirror.TrackContainerChanges()
	return &stateWriter{log: log, collect: collect,
		delay: stateWriteDelay, minInterval: stateWriteInterval, syncEvery: stateSyncEvery, backoff: stateWriteBackoff,
		stallAfter: stateWriteStallAfter, closeWait: stateCloseWait,
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		mirror: mirror, started: time.Now(),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cpupool_state_write_duration_seconds",
			Help:    "Time the background writer takes to write (op=write) or fsync (op=sync) the state file.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 12),
		}, []string{"op"})}
}

// start begins writing to store and grants (which may be nil), once; until
// then changes only wait.
func (w *stateWriter) start(store state.Store, grants *grantsFile) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.store != nil || w.stopped {
		return
	}
	w.store, w.grants = store, grants
	go w.run()
}

// changed tells the writer that memory is at generation gen. It never
// blocks: handlers call it under the plugin's lock.
func (w *stateWriter) changed(gen uint64) {
	w.want.Store(gen)
	w.behindSince.CompareAndSwap(0, time.Now().UnixNano())
	if w.due.Load() {
		return // the scheduled write has not collected yet: it takes this change
	}
	select {
	case w.kick <- struct{}{}:
	default: // a write is already due; it will take this change too
	}
}

// run is the writer goroutine.
func (w *stateWriter) run() {
	proflabel.Worker(proflabel.StateWriter).Apply()
	defer close(w.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	syncTick := time.NewTicker(w.syncEvery)
	defer syncTick.Stop()
	var (
		armed     bool
		lastStart time.Time
		wait      = w.backoff.Initial
	)
	for {
		select {
		case <-w.quit:
			return
		case <-w.kick:
			if !armed {
				timer.Reset(max(w.delay, time.Until(lastStart.Add(w.minInterval))))
				armed = true
				w.due.Store(true)
			}
		case <-timer.C:
			armed = false
			w.due.Store(false)
			lastStart = time.Now()
			if err := w.write(); err != nil {
				timer.Reset(wait)
				armed = true
				w.due.Store(true)
				wait = min(wait*2, w.backoff.Max)
				continue
			}
			wait = w.backoff.Initial
		case <-syncTick.C:
			w.sync()
		}
	}
}

// write brings the mirrors up to date and stores them if they are newer
// than what is on disk: the state, then the grants. A state saved before
// the grants failed is not saved again by the retry.
func (w *stateWriter) write() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.store == nil || w.want.Load() == w.written {
		return nil
	}
	gen := w.collect(w.mirror, &w.grantsMirror)
	if gen < w.written {
		// Generations only grow under the plugin's lock; never write back.
		return fmt.Errorf("state generation went back from %d to %d", w.written, gen)
	}
	if gen == w.written {
		return nil
	}
	if gen != w.saved {
		start := time.Now()
		w.startStep("writing state", start)
		err := w.store.Save(w.mirror)
		w.busy.Store(nil)
		w.durations.WithLabelValues("write").Observe(time.Since(start).Seconds())
		if err != nil {
			return w.failed("writing state", err)
		}
		w.saved = gen
	}
	if w.grants != nil {
		// A no-op unless the grants changed since the file was written
		// (by this writer or by Grant). Durable, unlike the state: see
		// grantsFile.
		w.startStep("writing kubelet grants", time.Now())
		err := w.grants.save(w.grantsMirror, true)
		w.busy.Store(nil)
		if err != nil {
			return w.failed("writing kubelet grants", err)
		}
	}
	if w.failing > 0 {
		w.log.Infof("state written again after %d failed attempts", w.failing)
		w.failing = 0
	}
	w.writeFailure.Store(nil)
	w.written = gen
	w.onDisk.Store(gen)
	w.writes.Add(1)
	now := time.Now().UnixNano()
	w.lastWrite.Store(now)
	if w.want.Load() == gen {
		w.behindSince.Store(0)
		// A change may have come in between the check and the store: it
		// kicked the writer, and its write sets behindSince again below.
		if w.want.Load() != gen {
			w.behindSince.CompareAndSwap(0, now)
		}
	} else {
		w.behindSince.Store(now)
	}
	return nil
}

// failed counts and logs a failed write; the caller retries with backoff.
func (w *stateWriter) failed(what string, err error) error {
	w.errors.Add(1)
	w.failing++
	noteFailure(&w.writeFailure, what, err)
	w.log.Errorf("%s failed (attempt %d; retrying with backoff, containers are still placed): %v", what, w.failing, err)
	return err
}

// sync makes the written state and grants durable if a write happened
// since the last sync.
func (w *stateWriter) sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.store == nil || w.synced == w.written {
		return nil
	}
	start := time.Now()
	w.startStep("syncing state to disk", start)
	err := w.store.Sync()
	if err == nil && w.grants != nil {
		err = w.grants.sync()
	}
	w.busy.Store(nil)
	w.durations.WithLabelValues("sync").Observe(time.Since(start).Seconds())
	if err != nil {
		w.errors.Add(1)
		noteFailure(&w.syncFailure, "syncing state to disk", err)
		w.log.Errorf("syncing state to disk: %v", err)
		return err
	}
	w.syncFailure.Store(nil)
	w.synced = w.written
	return nil
}

// Flush writes and syncs every change made so far, now.
func (w *stateWriter) Flush() error {
	if err := w.write(); err != nil {
		return err
	}
	return w.sync()
}

// Close flushes and stops the writer; later changes are not written. It
// waits at most closeWait for a write or sync that does not return (a
// hung disk), and then returns an error wrapping errStateWriteStalled,
// leaving the write to the process's exit. That loses nothing the next
// start cannot redo: Save writes a temporary file and renames it over the
// state file (state.FileStore.Save, atomicfile.Pending), so the file on
// disk is the last whole state whatever the moment of exit, a temporary
// file left behind is removed at the next start (removeStaleTemps), and
// the decisions not yet in it are the runtime's to tell again: Synchronize
// rebuilds them from where containers run. The kubelet grants file is
// written the same way, and Grant writes it durably before it answers.
// The host files' originals are not the writer's: their journal is
// written before any host file changes.
func (w *stateWriter) Close() error {
	return within(w.closeWait, func() error {
		w.halt()
		err := w.Flush()
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		return err
	})
}

// errStateWriteStalled: a write or sync did not return in time.
var errStateWriteStalled = errors.New("the state write under way has not returned")

// within runs f and waits at most d for it: after that it returns an
// error wrapping errStateWriteStalled and f goes on alone.
func within(d time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%w after %s: leaving it to the process's exit (the state file on disk is whole; the next start re-reads the runtime)", errStateWriteStalled, d)
	}
}

// writerBusy is a write or sync under way.
type writerBusy struct {
	what  string
	since time.Time
}

// startStep records the write or sync that begins.
func (w *stateWriter) startStep(what string, start time.Time) {
	w.busy.Store(&writerBusy{what: what, since: start})
}

// halt stops the goroutine, if it was started.
func (w *stateWriter) halt() {
	w.mu.Lock()
	running := w.store != nil
	w.mu.Unlock()
	w.once.Do(func() { close(w.quit) })
	if running {
		<-w.done
	}
}

// behind is how long memory has held changes the file lacks.
func (w *stateWriter) behind() time.Duration {
	since := w.behindSince.Load()
	if since == 0 {
		return 0
	}
	return time.Since(time.Unix(0, since))
}

// lastWriteAge is the time since the last successful write (since the
// writer started, before the first one).
func (w *stateWriter) lastWriteAge() time.Duration {
	last := w.lastWrite.Load()
	if last == 0 {
		return time.Since(w.started)
	}
	return time.Since(time.Unix(0, last))
}
