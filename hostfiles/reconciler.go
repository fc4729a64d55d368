package hostfiles

// The Reconciler's life and pace: its state, Start, Kick, Close and
// Flush, the goroutine that coalesces kicks into passes and backs off
// after a failed one, and the Status snapshot each pass publishes. What a
// pass does is in pass.go and the files it names.

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

// Timing paces the passes; see the package comment.
type Timing struct {
	Delay, MinInterval, Rescan time.Duration
	BackoffInitial, BackoffMax time.Duration
	// BusyShare, when above 0, bounds the share of its time the worker
	// spends in kicked passes: after a pass that took d, the next kicked
	// one starts no sooner than d/BusyShare after it began (and never
	// sooner than MinInterval), or at the next Rescan, which takes it:
	// d counts what the pass waited for. Zero leaves MinInterval alone.
	BusyShare float64
	// BusyMax, when above 0, is the most BusyShare may space two kicked
	// passes: a grant's IRQs and partitions wait at most this long for a
	// pass after a long one (a pass that waited seconds for systemd must
	// not put the next change off four times as long).
	BusyMax time.Duration
}

// DefaultTiming coalesces a burst of container events into one pass and
// rescans every 10 s.
//
// Kicked passes take at most a quarter of the worker's time (BusyShare):
// under a stream of creations the passes ran back to back (170 ms each
// on a 384-CPU fixture with every isolation feature on, issue 45), one
// core busy for as long as the stream lasted, and every reply waited for
// the cores that left. A pass of 2 ms is still followed 100 ms later,
// and no pass more than a second later (BusyMax).
var DefaultTiming = Timing{Delay: 10 * time.Millisecond, MinInterval: 100 * time.Millisecond, Rescan: 10 * time.Second,
	BackoffInitial: 100 * time.Millisecond, BackoffMax: 30 * time.Second, BusyShare: 0.25, BusyMax: time.Second}

// interval is the least time from a pass's start to the next kicked
// one's, after a pass that took took.
func (t Timing) interval(took time.Duration) time.Duration {
	if t.BusyShare <= 0 {
		return t.MinInterval
	}
	spaced := time.Duration(float64(took) / t.BusyShare)
	if t.BusyMax > 0 {
		spaced = min(spaced, t.BusyMax)
	}
	return max(t.MinInterval, spaced)
}

// Status is a snapshot for metrics, status and the audit.
type Status struct {
	Passes, Writes, Restores, TransientErrors, PermanentErrors uint64
	// FullPasses counts the passes that read every wanted file (the
	// rescans, Flush); KickedPasses the others (a kick's, a retry's,
	// FlushKicked); Settled the wanted files those took as known to meet
	// their want, unread. Each is counted on its own, so that each only
	// grows however a snapshot falls (Passes is their sum, counted apart).
	FullPasses, KickedPasses, Settled uint64
	// ForeignRestores counts the restores of records whose owner no
	// Source of this process claims (written by another version).
	ForeignRestores uint64
	// Records counts the journal's records by owner: files changed and not
	// yet restored.
	Records map[string]int
	// Failures are the files refused for good, by path.
	Failures []Failure
	// Nearest are the recorded files whose original the kernel refuses
	// for now and that hold the nearest value it takes (ErrNearest), by
	// path: not failures; their records stay.
	Nearest []string
	// NearestOwners is the owner of each path of Nearest, from its
	// record: the journal has no lock and only passes may read it, so a
	// scrape (cpupool_host_files_widened) takes the owners from here.
	NearestOwners map[string]string
	// LastPass is when the last pass ended; LastError its transient
	// errors, empty when it completed.
	LastPass  time.Time
	LastError string
}

// Reconciler applies the Sources' plans in the background; see the package
// comment.
type Reconciler struct {
	fs      FS
	journal *Journal
	log     *logrus.Logger
	sources []Source
	timing  Timing
	// now is the clock of the retries of refusals (tests move it).
	now func() time.Time
	// roots and realRoots (symlinks resolved) confine the restores of
	// journal records (RestoreOnlyUnder); nil: not confined. rules admit
	// single files outside them (RestoreAlsoWhere, confine.go).
	roots, realRoots []string
	rules            []func(path string) bool

	// ready is set by the first Kick: until then the owners have not said
	// what they want, and a pass would restore everything.
	ready atomic.Bool
	// planDue is set by the Kick that wakes the worker and cleared when the
	// pass it arms starts, before that pass asks the Sources for their
	// Plans: a Kick meanwhile needs no wake (it would cost the handler
	// that kicks a futex wake and a second runnable goroutine, issue 45),
	// since that pass takes its change; one after the clear wakes the
	// worker again. Only the passes that run() starts clear it.
	planDue atomic.Bool
	kick    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	start   sync.Once
	stop    sync.Once

	mu     sync.Mutex // held for a whole pass
	failed map[string]Failure
	// shown is what a KernelForm file read right after its want was
	// written, by path.
	shown map[string]shown
	// known is what each wanted file held when a pass last read it or
	// wrote it, by path: a pass that is not a rescan takes a file whose
	// want this content still meets as settled, without reading it
	// (passWork.settled). Only passes change it; a rescan starts it anew.
	known map[string]string
	// nearest are the records whose restore left the nearest value the
	// kernel takes (ErrNearest): path → the original tried, retried at
	// the full passes only.
	nearest map[string]string
	stopped bool
	// foreign are the owners without a Source whose records were seen,
	// so that each is logged once.
	foreign map[string]bool

	passes, writes, restores, transient, permanent, foreignRestores atomic.Uint64
	fullPasses, kickedPasses, settledSkips                          atomic.Uint64
	statMu                                                          sync.Mutex
	records                                                         map[string]int
	failures                                                        []Failure
	nearestPaths                                                    []string
	nearestOwners                                                   map[string]string
	lastPass                                                        time.Time
	lastError                                                       string
}

// NewReconciler returns a reconciler of the journal's files for sources,
// whose owner names must differ. It does nothing before Start and Kick.
func NewReconciler(fsys FS, journal *Journal, log *logrus.Logger, timing Timing, sources ...Source) *Reconciler {
	r := &Reconciler{fs: fsys, journal: journal, log: log, sources: sources, timing: timing, now: time.Now,
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}), failed: map[string]Failure{}, foreign: map[string]bool{},
		shown: map[string]shown{}, known: map[string]string{}, nearest: map[string]string{}}
	r.publish(nil)
	return r
}

// Start runs the background goroutine, once.
func (r *Reconciler) Start() {
	r.start.Do(func() { go r.run() })
}

// Kick says that a Source's wants changed (or, the first time, that they
// are known). It never blocks and does no I/O, and wakes the worker only
// when no pass is due that has yet to ask the Sources (planDue).
func (r *Reconciler) Kick() {
	r.ready.Store(true)
	if !r.planDue.CompareAndSwap(false, true) {
		return // the due pass has not planned yet: it takes this change
	}
	select {
	case r.kick <- struct{}{}:
	default: // a pass is due already; it will take this change
	}
}

// Close stops the goroutine. It restores nothing: the plugin stopping
// (for an upgrade) leaves the containers running, and their CPUs must stay
// as they are; the next process restores what it no longer wants.
func (r *Reconciler) Close() {
	r.stop.Do(func() { close(r.quit) })
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	select {
	case <-r.done:
	default:
		r.start.Do(func() { close(r.done) }) // never started
		<-r.done
	}
}

// Flush makes a full pass now, as the rescan's, which reads every wanted
// file, and returns its transient errors.
func (r *Reconciler) Flush() error {
	return r.flush(true)
}

// FlushKicked makes a pass now as a kick's: the files known to meet their
// want are not read again (see the package comment). It returns its
// transient errors.
func (r *Reconciler) FlushKicked() error {
	return r.flush(false)
}

func (r *Reconciler) flush(full bool) error {
	r.ready.Store(true)
	if err := r.pass(full, nil); !errors.Is(err, errPending) {
		return err
	}
	return nil
}

// errPending is a pass's result when a Source left files for a later pass
// (Plan.Pending).
var errPending = errors.New("some wanted files are left for a later pass")

func (r *Reconciler) run() {
	labels := &passLabels{worker: proflabel.Worker(proflabel.HostFiles)}
	labels.leave()
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	rescan := time.NewTicker(r.timing.Rescan)
	defer rescan.Stop()
	var (
		armed     bool
		due       time.Time // when the armed timer fires
		lastStart time.Time
		lastTook  time.Duration // how long the last pass took
		// kicked: the armed timer is a kick's (not a backoff's), which
		// the spacing after a long pass (BusyShare) may have put far off.
		kicked bool
		// spacedUntil is when a kick's pass is due by the spacing; until
		// then its timer fires every MinInterval to ask whether a Source
		// tightens (Tightener), which starts the pass at once.
		spacedUntil time.Time
		tighteners  = r.hasTighteners()
		wait        = r.timing.BackoffInitial
		// full: the next pass is a rescan's, which reads every wanted
		// file; the first is one too (nothing is known yet).
		full = true
	)
	arm := func(d time.Duration) {
		timer.Reset(d)
		armed, due = true, time.Now().Add(d)
	}
	for {
		select {
		case <-r.quit:
			return
		case <-r.kick:
			// Only the Kick that set planDue sends here; the pass armed now,
			// or the sooner one kept, clears planDue before it plans.
			// A change gets its pass at the normal pace, even while a
			// failed pass backs off: only the failed work may wait, not
			// every change after it. A timer already due sooner (an
			// earlier kick) is kept, so that kicks still coalesce. The
			// kicked pass tries the failing work again too; if it fails
			// again, the backoff goes on growing from where it was.
			spaced := max(r.timing.Delay, time.Until(lastStart.Add(r.timing.interval(lastTook))))
			next := spaced
			if tighteners {
				next = min(spaced, max(r.timing.Delay, time.Until(lastStart.Add(r.timing.MinInterval))))
			}
			if !armed || time.Until(due) > next {
				arm(next)
				kicked = true
				spacedUntil = time.Now().Add(spaced)
			}
		case <-rescan.C:
			// A kick's pass already due becomes the rescan, now: under a
			// steady stream of kicks, files still get read every Rescan,
			// and a kick's pass spaced far off by a long pass (its length
			// counts what it waited for: a lock, systemd, a disk) waits
			// no longer than the rescan. A backoff's timer is kept.
			full = true
			if (!armed || kicked) && r.ready.Load() {
				arm(0)
				kicked = false
			}
		case <-timer.C:
			armed = false
			if kicked && time.Now().Before(spacedUntil) && !r.tightens() {
				// Nothing stricter is wanted yet: the pass keeps the
				// spacing, and the worker asks again in MinInterval (a
				// grant's Kick during the wait wakes no one: planDue).
				arm(min(max(r.timing.MinInterval, time.Millisecond), time.Until(spacedUntil)))
				continue
			}
			// Before the pass plans: a Kick from now on wakes the worker
			// again, for a change this pass may have planned without.
			r.planDue.Store(false)
			lastStart = time.Now()
			err := r.pass(full, labels)
			lastTook = time.Since(lastStart)
			if r.ready.Load() {
				full = false
			}
			if err != nil {
				arm(wait)
				kicked = false
				wait = min(wait*2, r.timing.BackoffMax)
				continue
			}
			wait = r.timing.BackoffInitial
		}
	}
}

// hasTighteners tells whether a Source may tighten its wants (Tightener).
func (r *Reconciler) hasTighteners() bool {
	for _, src := range r.sources {
		if _, ok := src.(Tightener); ok {
			return true
		}
	}
	return false
}

// tightens tells whether a Source wants something stricter than its last
// Plan (Tightener); under the pass lock, as Plan runs.
func (r *Reconciler) tightens() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, src := range r.sources {
		if t, ok := src.(Tightener); ok && t.Tightens() {
			return true
		}
	}
	return false
}

// publish updates the Status snapshot; called at the end of a pass (under
// mu, as it reads the journal) and before the reconciler is shared.
func (r *Reconciler) publish(err error) {
	records := map[string]int{}
	if r.journal != nil {
		for _, rec := range r.journal.records {
			records[rec.Owner]++
		}
	}
	fails := slices.SortedFunc(maps.Values(r.failed), func(a, b Failure) int { return strings.Compare(a.Path, b.Path) })
	var nearest []string
	var owners map[string]string
	if len(r.nearest) > 0 {
		nearest = slices.Sorted(maps.Keys(r.nearest))
		owners = make(map[string]string, len(nearest))
		for _, path := range nearest {
			if rec, ok := r.journal.Get(path); ok {
				owners[path] = rec.Owner
			}
		}
	}
	r.statMu.Lock()
	defer r.statMu.Unlock()
	r.records, r.failures, r.nearestPaths, r.nearestOwners = records, fails, nearest, owners
	r.lastPass = time.Now()
	r.lastError = ""
	if err != nil {
		r.lastError = err.Error()
	}
}

// Status returns a snapshot; it never waits for a pass.
func (r *Reconciler) Status() Status {
	r.statMu.Lock()
	defer r.statMu.Unlock()
	return Status{Passes: r.passes.Load(), FullPasses: r.fullPasses.Load(), KickedPasses: r.kickedPasses.Load(), Settled: r.settledSkips.Load(), Writes: r.writes.Load(), Restores: r.restores.Load(),
		TransientErrors: r.transient.Load(), PermanentErrors: r.permanent.Load(), ForeignRestores: r.foreignRestores.Load(),
		Records: maps.Clone(r.records), Failures: slices.Clone(r.failures), Nearest: slices.Clone(r.nearestPaths), NearestOwners: maps.Clone(r.nearestOwners), LastPass: r.lastPass, LastError: r.lastError}
}
