package hostfiles

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// Change is one host file a Source wants changed.
type Change struct {
	Path string
	// Want computes the content wanted from the file's original content
	// (the journal's record once the file has been changed, else the file
	// as it is). An error is reported like a permanent write error.
	Want func(original string) (string, error)
	// Satisfied tells whether content already meets the want (nil: equal
	// after trimming white space). An IRQ affinity is satisfied by any set
	// that avoids the banned CPUs, so that irqbalance may place the IRQ
	// within it without the plugin writing it back. A file whose original
	// content is satisfied is neither recorded nor written, and a changed
	// one gets its original back.
	Satisfied func(content, want string) bool
	// KernelForm says that the kernel may show an accepted value in a form
	// of its own (acpi-cpufreq resolves a frequency to its table,
	// intel_pstate shows preference 128 as balance_performance): what the
	// file reads right after a successful write of the want also meets
	// that want, for as long as the file reads it; it is not rewritten at
	// every rescan.
	KernelForm bool
	// Order sorts the writes of a pass, ascending, and the restores,
	// descending (then by path): a cgroup's parents take CPUs before it,
	// and give them back after it.
	Order int
	// Gives, when set, tells whether writing want over content gives
	// something back (a cgroup's exclusive CPUs shrink): such writes run
	// right after the restores, in descending Order like them, before
	// every other write.
	Gives func(content, want string) bool
	// Verify, when set, checks the content of a file that meets the want:
	// right after the pass wrote it, and at every later pass. An error is
	// a problem the kernel reports in the file itself (a cgroup partition
	// it found invalid, "isolated invalid (<reason>)"): the file is left as
	// it is, and the problem is logged once, counted as a permanent error
	// and listed in Status.Failures (Failure.Invalid) until the content
	// passes again or the file is no longer wanted.
	Verify func(content string) error
	// Original, when set, is the original to record for a file first seen
	// with content (not yet in the journal): what it held before someone
	// else's change that the file only inherited. A thread forked while
	// housekeeping confined its parent inherits the narrow affinity: its
	// original is taken as that affinity widened again, so that it gets
	// the CPUs back when released. The want is then computed from it.
	Original func(content string) string
	// Resettable says that the kernel may change the file behind the
	// writes of the same pass: a thread's affinity, which the kernel
	// resets to its cgroup's CPUs whenever that cgroup's cpuset changes
	// (a unit's AllowedCPUs=, a top-level cgroup's cpuset.cpus). Its
	// original is recorded even when it meets the want, so that it is
	// given back after such a reset; it is written after every other
	// write of the pass, read again just before (skipped when it meets the
	// want then), and so set again after a reset the pass itself caused.
	// Give it an Order below the changes that reset it, so that it is
	// restored after them too (also by the next process after a kill -9:
	// the journal keeps the Order).
	Resettable bool
}

// Plan is what a Source wants in one pass.
type Plan struct {
	Changes []Change
	// Before runs after the pass recorded new originals and before it
	// writes; After runs after its writes and restores. Both carry state
	// outside files that must follow the files (irqbalance's banned CPUs).
	// An error is transient: the pass is retried.
	Before, After func() error
	// Pending says that some wanted files cannot be planned in this pass:
	// they do not exist yet (a container's cgroup the runtime creates
	// after the reply), or their original can be read only once this pass
	// has written others (power's preference under the performance
	// governor it restores). The pass is repeated with backoff, without an
	// error.
	Pending bool
}

// Source is an owner of host file changes.
type Source interface {
	// Owner names the source in the journal, logs and Status ("irq").
	Owner() string
	// Plan lists the files the source wants changed now. It runs on the
	// reconciler's goroutine, off every reply path, and may read files.
	// On error the source's files are left as they are (neither written
	// nor restored) and the pass is retried.
	Plan() (Plan, error)
}

// Explainer is an optional interface of a Source: a hint for the log and
// Status when the kernel refuses one of its files for good.
type Explainer interface {
	Explain(path string, err error) string
}

// Identifier is an optional interface of a Source whose paths may come to
// name another object while a record waits: the kernel frees an IRQ
// number and gives it to another device, whose affinity starts from the
// default. The original of the old object is not the new one's: a record
// whose identity changed is dropped rather than restored, and a file
// still wanted gets the new object's content recorded as its original.
type Identifier interface {
	// Identity names what the file at path belongs to now: names
	// separated by commas (an IRQ shared by several handlers), of which
	// one in common is enough to be the same object; "" when that is
	// unknown, which matches any identity.
	Identity(path string) string
}

// identity is what a Source says the file at path belongs to, "" when it
// does not say.
func identity(src Source, path string) string {
	if id, ok := src.(Identifier); ok {
		return id.Identity(path)
	}
	return ""
}

// reused tells whether the file of a record now belongs to something
// else than when its original was recorded; an unknown identity, then or
// now, is not a change.
func reused(rec Record, now string) bool {
	if rec.Identity == "" || now == "" {
		return false
	}
	names := strings.Split(now, ",")
	for _, n := range strings.Split(rec.Identity, ",") {
		if slices.Contains(names, n) {
			return false
		}
	}
	return true
}

// Timing paces the passes; see the package comment.
type Timing struct {
	Delay, MinInterval, Rescan time.Duration
	BackoffInitial, BackoffMax time.Duration
}

// DefaultTiming coalesces a burst of container events into one pass and
// rescans every 10 s.
var DefaultTiming = Timing{Delay: 10 * time.Millisecond, MinInterval: 100 * time.Millisecond, Rescan: 10 * time.Second,
	BackoffInitial: 100 * time.Millisecond, BackoffMax: 30 * time.Second}

// Failure is a file the kernel refused for good; it is not retried while
// its owner wants the same value (EINVAL only at the Rescan passes: see
// retryDue).
type Failure struct {
	Path  string `json:"path"`
	Owner string `json:"owner"`
	// Value is what was being written: the wanted value, or the original
	// when Restore is true.
	Value   string `json:"value"`
	Restore bool   `json:"restore,omitempty"`
	// Invalid: the write was accepted, but the file reads a state the
	// kernel reports as invalid (Change.Verify); Error says why.
	Invalid bool `json:"invalid,omitempty"`
	// Untrusted: a journal record (Restore is set too) of a file outside
	// the roots the Reconciler may restore (RestoreOnlyUnder): not
	// written, and kept in the journal.
	Untrusted bool   `json:"untrusted,omitempty"`
	Error     string `json:"error"`
	Hint      string `json:"hint,omitempty"`
	errno     syscall.Errno
	// tried is when the refused write was last tried (retryDue).
	tried time.Time
}

// Status is a snapshot for metrics, status and the audit.
type Status struct {
	Passes, Writes, Restores, TransientErrors, PermanentErrors uint64
	// ForeignRestores counts the restores of records whose owner no
	// Source of this process claims (written by another version).
	ForeignRestores uint64
	// Records counts the journal's records by owner: files changed and not
	// yet restored.
	Records map[string]int
	// Failures are the files refused for good, by path.
	Failures []Failure
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
	kick  chan struct{}
	quit  chan struct{}
	done  chan struct{}
	start sync.Once
	stop  sync.Once

	mu     sync.Mutex // held for a whole pass
	failed map[string]Failure
	// shown is what a KernelForm file read right after its want was
	// written, by path.
	shown   map[string]shown
	stopped bool
	// foreign are the owners without a Source whose records were seen,
	// so that each is logged once.
	foreign map[string]bool

	passes, writes, restores, transient, permanent, foreignRestores atomic.Uint64
	statMu                                                          sync.Mutex
	records                                                         map[string]int
	failures                                                        []Failure
	lastPass                                                        time.Time
	lastError                                                       string
}

// NewReconciler returns a reconciler of the journal's files for sources,
// whose owner names must differ. It does nothing before Start and Kick.
func NewReconciler(fsys FS, journal *Journal, log *logrus.Logger, timing Timing, sources ...Source) *Reconciler {
	r := &Reconciler{fs: fsys, journal: journal, log: log, sources: sources, timing: timing, now: time.Now,
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}), failed: map[string]Failure{}, foreign: map[string]bool{},
		shown: map[string]shown{}}
	r.publish(nil)
	return r
}

// ErrOutsideRoots is why a journal record is not restored: its file is
// outside the roots given to RestoreOnlyUnder.
var ErrOutsideRoots = errors.New("outside the host files this process may restore")

// RestoreOnlyUnder confines the restores of journal records to files
// under roots (the plugin's: /proc/irq, /sys/devices/system/cpu and the
// cgroup root, under its configured procRoot, sysfsRoot and cgroupRoot).
// The journal is a file, and a damaged or forged one must not make the
// plugin write any other host file: a record of a file outside them,
// lexically or once symlinks are resolved (/sys/devices/system/cpu/cpu0/
// node0 leads to /sys/devices/system/node), is not written; it is logged
// once, reported in Status as an untrusted Failure, and kept in the
// journal, where a process with other roots may still restore it.
// Without roots, every record may be restored (tests of one Source).
// Call it before Start and Flush.
func (r *Reconciler) RestoreOnlyUnder(roots ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roots, r.realRoots = []string{}, []string{}
	for _, root := range roots {
		root = filepath.Clean(root)
		r.roots = append(r.roots, root)
		if real, err := filepath.EvalSymlinks(root); err == nil {
			root = real
		}
		r.realRoots = append(r.realRoots, root)
	}
}

// confined checks a journal record's path against the roots: an error
// wrapping ErrOutsideRoots when it is outside, another error when its
// symlinks could not be resolved (transient).
func (r *Reconciler) confined(path string) error {
	if r.roots == nil {
		return nil
	}
	clean := filepath.Clean(path)
	if !under(clean, r.roots) && !r.admitted(clean) {
		return fmt.Errorf("%w (%s)", ErrOutsideRoots, strings.Join(r.roots, ", "))
	}
	real, err := filepath.EvalSymlinks(clean)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // the write finds it gone (it never creates a file)
	case err != nil:
		return fmt.Errorf("resolving the symlinks of %s: %w", clean, err)
	case !under(real, r.realRoots) && !r.admitted(real):
		return fmt.Errorf("%w: it leads to %s (%s)", ErrOutsideRoots, real, strings.Join(r.roots, ", "))
	}
	return nil
}

// under tells whether path is one of roots or below one.
func under(path string, roots []string) bool {
	for _, root := range roots {
		if rel, err := filepath.Rel(root, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}

// Start runs the background goroutine, once.
func (r *Reconciler) Start() {
	r.start.Do(func() { go r.run() })
}

// Kick says that a Source's wants changed (or, the first time, that they
// are known). It never blocks and does no I/O.
func (r *Reconciler) Kick() {
	r.ready.Store(true)
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

// Flush makes a pass now, as if kicked, and returns its transient errors.
func (r *Reconciler) Flush() error {
	r.ready.Store(true)
	if err := r.pass(); !errors.Is(err, errPending) {
		return err
	}
	return nil
}

// errPending is a pass's result when a Source left files for a later pass
// (Plan.Pending).
var errPending = errors.New("some wanted files are left for a later pass")

func (r *Reconciler) run() {
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
		wait      = r.timing.BackoffInitial
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
			// A change gets its pass at the normal pace, even while a
			// failed pass backs off: only the failed work may wait, not
			// every change after it. A timer already due sooner (an
			// earlier kick) is kept, so that kicks still coalesce. The
			// kicked pass tries the failing work again too; if it fails
			// again, the backoff goes on growing from where it was.
			next := max(r.timing.Delay, time.Until(lastStart.Add(r.timing.MinInterval)))
			if !armed || time.Until(due) > next {
				arm(next)
			}
		case <-rescan.C:
			if !armed && r.ready.Load() {
				arm(0)
			}
		case <-timer.C:
			armed = false
			lastStart = time.Now()
			if err := r.pass(); err != nil {
				arm(wait)
				wait = min(wait*2, r.timing.BackoffMax)
				continue
			}
			wait = r.timing.BackoffInitial
		}
	}
}

// write is one host file a pass writes.
type write struct {
	path, value, owner string
	order              int
	// fresh: its original is recorded in this pass (the file still holds
	// it); gives: it gives something back (Change.Gives).
	fresh, gives bool
	verify       func(content string) error
	kernelForm   bool
	// resettable: written after every other write, and only when the
	// file does not meet the want when it is written (Change.Resettable).
	resettable bool
	satisfied  func(content string) bool
}

// shown is what a file read right after a write of want.
type shown struct{ want, content string }

// pass brings the host files to the Sources' plans: it plans, restores
// what no owner wants any more, records the new originals (and drops the
// restored ones) in one journal write, runs the Before hooks, writes, and
// runs the After hooks. Restores come first so that what a released
// owner held (a CPU in a cgroup partition) is free before anything new
// claims it. It returns the transient errors, joined.
func (r *Reconciler) pass() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || !r.ready.Load() {
		return nil
	}
	r.passes.Add(1)
	var (
		problems   []error
		claimed    = map[string]string{} // path → owner, for every change
		planned    = map[string]string{} // path → owner, for changes to keep
		planOK     = map[string]bool{}   // owners whose plan succeeded
		sourceOf   = map[string]Source{}
		writes     []write
		fresh      = map[string]Record{}
		drops      []string
		befores    []func() error
		afters     []func() error
		newlyFails []Failure
		pending    bool
		stale      = map[string]bool{} // records of a reused path, dropped
	)
	transient := func(err error) {
		r.transient.Add(1)
		problems = append(problems, err)
	}
	// refused notes a permanent refusal. It is counted and logged when
	// it is new: a retry (retryDue) refused the same way is not.
	refused := func(f Failure, err error) {
		f.Error, f.errno, f.tried = err.Error(), errnoOf(err), r.now()
		if ex, ok := sourceOf[f.Owner].(Explainer); ok && !f.Untrusted {
			f.Hint = ex.Explain(f.Path, err)
		}
		if prev, ok := r.failed[f.Path]; !ok || prev.Value != f.Value || prev.Restore != f.Restore || prev.Invalid || prev.errno != f.errno || prev.Untrusted != f.Untrusted {
			r.permanent.Add(1)
			newlyFails = append(newlyFails, f)
		}
		r.failed[f.Path] = f
	}
	// verified checks a file that meets its want (Change.Verify): a
	// problem is counted and logged when it is new (another value, another
	// reason), not at every pass it lasts.
	verified := func(verify func(string) error, path, owner, want, content string) {
		if verify == nil {
			return
		}
		prev, had := r.failed[path]
		err := verify(content)
		if err == nil {
			if had && prev.Invalid {
				delete(r.failed, path)
				r.log.Infof("host files: %s: %s is valid again", owner, path)
			}
			return
		}
		f := Failure{Path: path, Owner: owner, Value: want, Invalid: true, Error: err.Error()}
		if !had || !prev.Invalid || prev.Value != want || prev.Error != f.Error {
			r.permanent.Add(1)
			newlyFails = append(newlyFails, f)
		}
		r.failed[path] = f
	}

	// Plan.
	for _, src := range r.sources {
		owner := src.Owner()
		sourceOf[owner] = src
		plan, err := src.Plan()
		if err != nil {
			transient(fmt.Errorf("%s: planning: %w", owner, err))
			continue
		}
		planOK[owner] = true
		pending = pending || plan.Pending
		if plan.Before != nil {
			befores = append(befores, plan.Before)
		}
		if plan.After != nil {
			afters = append(afters, plan.After)
		}
		for _, ch := range plan.Changes {
			if other, dup := claimed[ch.Path]; dup {
				transient(fmt.Errorf("%s and %s both want to change %s; %s's change is ignored", other, owner, ch.Path, owner))
				continue
			}
			claimed[ch.Path] = owner
			planned[ch.Path] = owner
			rec, journaled := r.journal.Get(ch.Path)
			ident := identity(src, ch.Path)
			if journaled && reused(rec, ident) {
				// Its original is another object's: the file's content
				// now is this one's.
				r.log.Infof("host files: %s: %s now belongs to %s, not %s; its recorded original %q is dropped, and what it holds now is its original", owner, ch.Path, ident, rec.Identity, rec.Original)
				drops = append(drops, ch.Path)
				stale[ch.Path] = true
				journaled = false
			}
			original := rec.Original
			if !journaled {
				data, err := r.fs.ReadFile(ch.Path)
				if err != nil {
					if Classify(err) != Gone {
						transient(fmt.Errorf("%s: reading %s: %w", owner, ch.Path, err))
					}
					continue
				}
				original = trim(data)
				if ch.Original != nil {
					original = ch.Original(original)
				}
			}
			want, err := ch.Want(original)
			if err != nil {
				refused(Failure{Path: ch.Path, Owner: owner}, err)
				continue
			}
			if ch.Resettable && r.satisfied(ch, original, want) {
				// Recorded all the same, and checked again after the
				// pass's other writes, which may reset it.
				if !journaled {
					fresh[ch.Path] = Record{Original: original, Owner: owner, Order: ch.Order, Identity: ident}
				}
				writes = append(writes, r.resettableWrite(ch, want, owner, !journaled))
				continue
			}
			if r.satisfied(ch, original, want) {
				// The original meets the want: a file never changed is
				// left alone, a changed one gets its original back.
				delete(planned, ch.Path)
				if !journaled {
					delete(r.failed, ch.Path)
				}
				continue
			}
			if f, ok := r.failed[ch.Path]; ok && !f.Restore && !f.Invalid && f.Value == want && !r.retryDue(f) {
				continue // refused for good; not retried (EINVAL: not yet)
			}
			if !journaled {
				fresh[ch.Path] = Record{Original: original, Owner: owner, Order: ch.Order, Identity: ident}
				if ch.Resettable {
					writes = append(writes, r.resettableWrite(ch, want, owner, true))
					continue
				}
				writes = append(writes, write{path: ch.Path, value: want, owner: owner, order: ch.Order, fresh: true, verify: ch.Verify, kernelForm: ch.KernelForm})
				continue
			}
			if ch.Resettable {
				// Read when it is written, after the others.
				writes = append(writes, r.resettableWrite(ch, want, owner, false))
				continue
			}
			data, err := r.fs.ReadFile(ch.Path)
			if err != nil {
				if Classify(err) == Gone {
					drops = append(drops, ch.Path)
				} else {
					transient(fmt.Errorf("%s: reading %s: %w", owner, ch.Path, err))
				}
				continue
			}
			if r.satisfied(ch, trim(data), want) {
				verified(ch.Verify, ch.Path, owner, want, trim(data))
				continue
			}
			gives := ch.Gives != nil && ch.Gives(trim(data), want)
			writes = append(writes, write{path: ch.Path, value: want, owner: owner, order: ch.Order, gives: gives, verify: ch.Verify, kernelForm: ch.KernelForm})
		}
	}

	// Restore what no Source wants any more, for owners that said so, and
	// for owners this process does not have: a Source this build lacks
	// (the journal of another version) wants nothing here either. What
	// keeps a damaged or forged journal from writing just anything is the
	// roots (RestoreOnlyUnder), not the owner's name, which is as easy to
	// forge as the path.
	records := r.journal.Records()
	// heldBack is, by owner, the Order of a restore that failed for now
	// in this pass: the owner's records of lower Order wait for it (a
	// thread's affinity restored before its cgroup would be reset by the
	// cgroup's restore, its record gone).
	heldBack := map[string]int{}
	restores := slices.Collect(maps.Keys(records))
	slices.SortFunc(restores, func(a, b string) int {
		if d := records[b].Order - records[a].Order; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, path := range restores {
		rec := records[path]
		if _, wanted := planned[path]; wanted || stale[path] || !planOK[rec.Owner] && sourceOf[rec.Owner] != nil {
			continue
		}
		if o, held := heldBack[rec.Owner]; held && rec.Order < o {
			continue
		}
		prev, had := r.failed[path]
		if had && prev.Restore && prev.Value == rec.Original && !r.retryDue(prev) {
			continue // refused for good; tried again by the next process (EINVAL: at the next Rescan)
		}
		if err := r.confined(path); errors.Is(err, ErrOutsideRoots) {
			refused(Failure{Path: path, Owner: rec.Owner, Value: rec.Original, Restore: true, Untrusted: true}, err)
			continue
		} else if err != nil {
			transient(fmt.Errorf("%s: restoring %s: %w", rec.Owner, path, err))
			holdBack(heldBack, rec)
			continue
		}
		foreign := sourceOf[rec.Owner] == nil
		if foreign && !r.foreign[rec.Owner] {
			r.foreign[rec.Owner] = true
			n := 0
			for _, other := range records {
				if other.Owner == rec.Owner {
					n++
				}
			}
			r.log.Warnf("host files: the journal holds %d records of owner %q, which no source of this process claims (written by another version?); restoring them, as nothing here wants them", n, rec.Owner)
		}
		if src := sourceOf[rec.Owner]; src != nil {
			if now := identity(src, path); reused(rec, now) {
				r.log.Infof("host files: %s: %s now belongs to %s, not %s; its recorded original %q is dropped, not restored", rec.Owner, path, now, rec.Identity, rec.Original)
				delete(r.failed, path)
				drops = append(drops, path)
				continue
			}
		}
		err := r.fs.WriteFile(path, []byte(writable(rec.Original)))
		switch {
		case err == nil:
			r.restores.Add(1)
			if foreign {
				r.foreignRestores.Add(1)
			}
			if had && prev.Restore {
				r.log.Infof("host files: %s: %s took its original back on a retry", rec.Owner, path)
			}
			delete(r.failed, path)
			drops = append(drops, path)
		case Classify(err) == Gone:
			delete(r.failed, path)
			drops = append(drops, path)
		case Classify(err) == Permanent:
			// The record stays: losing the original would be worse than
			// trying it again after a restart.
			refused(Failure{Path: path, Owner: rec.Owner, Value: rec.Original, Restore: true}, err)
		default:
			transient(fmt.Errorf("%s: restoring %s: %w", rec.Owner, path, err))
			holdBack(heldBack, rec)
		}
	}

	// Record first: a file is written only once its original is on disk.
	if err := r.journal.Commit(fresh, drops); err != nil {
		transient(fmt.Errorf("recording %d original values and dropping %d restored ones: %w; the new values are not written", len(fresh), len(drops), err))
		writes = slices.DeleteFunc(writes, func(w write) bool { return w.fresh })
	}
	drops = nil
	for _, f := range befores {
		if err := f(); err != nil {
			transient(err)
		}
	}
	slices.SortFunc(writes, func(a, b write) int {
		switch {
		case a.resettable != b.resettable:
			if a.resettable {
				return 1
			}
			return -1
		case a.gives != b.gives:
			if a.gives {
				return -1
			}
			return 1
		case a.order != b.order && a.gives:
			return b.order - a.order
		case a.order != b.order:
			return a.order - b.order
		}
		return strings.Compare(a.path, b.path)
	})
	for _, w := range writes {
		if w.resettable {
			// What the file holds after the pass's other writes.
			data, err := r.fs.ReadFile(w.path)
			if err != nil {
				if Classify(err) == Gone {
					drops = append(drops, w.path)
				} else {
					transient(fmt.Errorf("%s: reading %s: %w", w.owner, w.path, err))
				}
				continue
			}
			if w.satisfied(trim(data)) {
				continue
			}
		}
		err := r.fs.WriteFile(w.path, []byte(writable(w.value)))
		switch {
		case err == nil:
			r.writes.Add(1)
			prev, had := r.failed[w.path]
			if had && !prev.Invalid && !prev.Restore && prev.Value == w.value {
				r.log.Infof("host files: %s: %s took the wanted value on a retry", w.owner, w.path)
			}
			delete(r.failed, w.path)
			if w.verify == nil && !w.kernelForm {
				break
			}
			// The kernel takes some writes and then reports the state it
			// ended in (an invalid partition), or shows the value in its
			// own form: read it back.
			data, err := r.fs.ReadFile(w.path)
			if err != nil {
				if Classify(err) != Gone {
					transient(fmt.Errorf("%s: reading back %s: %w", w.owner, w.path, err))
				}
				break
			}
			if w.kernelForm {
				r.shown[w.path] = shown{want: w.value, content: trim(data)}
			}
			if w.verify == nil {
				break
			}
			if had && prev.Invalid {
				r.failed[w.path] = prev // the same problem again is not new
			}
			verified(w.verify, w.path, w.owner, w.value, trim(data))
		case Classify(err) == Gone:
			drops = append(drops, w.path)
		case Classify(err) == Permanent:
			refused(Failure{Path: w.path, Owner: w.owner, Value: w.value}, err)
			if w.fresh && !w.resettable {
				// The kernel left the file as it was: nothing to restore.
				// A resettable one may have been reset since its original
				// was read: the record stays.
				drops = append(drops, w.path)
			}
		default:
			transient(fmt.Errorf("%s: writing %s: %w", w.owner, w.path, err))
		}
	}
	if err := r.journal.Commit(nil, drops); err != nil {
		transient(fmt.Errorf("dropping %d records of unchanged files: %w", len(drops), err))
	}
	for _, f := range afters {
		if err := f(); err != nil {
			transient(err)
		}
	}
	for path := range r.shown {
		if _, wanted := claimed[path]; !wanted {
			delete(r.shown, path) // the want is gone; the next write reads anew
		}
	}
	// A refusal of a file nobody wants and nobody changed is history.
	for path, f := range r.failed {
		if _, wanted := planned[path]; !wanted && !f.Restore {
			delete(r.failed, path)
		} else if _, rec := r.journal.Get(path); f.Restore && !rec {
			delete(r.failed, path)
		}
	}
	r.logRefusals(newlyFails)
	kept := make(map[string]string, len(r.failed))
	for path, f := range r.failed {
		kept[path] = f.Error
		if f.Hint != "" {
			kept[path] += " (" + f.Hint + ")"
		}
	}
	if err := r.journal.SetRefused(kept); err != nil {
		r.log.Warnf("host files: keeping the refused files for the audit: %v", err)
	}
	err := errors.Join(problems...)
	if err != nil {
		r.log.Warnf("host files: pass incomplete, retrying with backoff: %v", err)
	}
	r.publish(err)
	if err == nil && pending {
		return errPending
	}
	return err
}

// holdBack notes a restore that failed for now: the owner's records of
// lower Order wait for a later pass.
func holdBack(heldBack map[string]int, rec Record) {
	if _, held := heldBack[rec.Owner]; !held {
		heldBack[rec.Owner] = rec.Order
	}
}

// resettableWrite is the write of a Resettable change, made after every
// other write of the pass if the file does not meet want then.
func (r *Reconciler) resettableWrite(ch Change, want, owner string, fresh bool) write {
	return write{path: ch.Path, value: want, owner: owner, order: ch.Order, fresh: fresh, resettable: true,
		satisfied: func(content string) bool { return r.satisfied(ch, content, want) }}
}

// retryDue tells whether a permanent refusal is due to be tried again.
// EINVAL is the kernel rejecting a value, and for some files that depends
// on other files: a cgroup's cpuset.cpus.exclusive is refused while a
// sibling still holds those CPUs exclusively, which may change at any
// time. So such a refusal is tried again at each Rescan pass (the pace at
// which passes look for drift anyway) while the same value is wanted. It
// is due half a Rescan after its last try: the ticker's next pass starts
// a little less than a Rescan after the pass that tried, and kicked passes
// in between retry it no more often than that. The others (EIO or EPERM
// of a kernel-managed IRQ, EROFS) are properties of the file, not of its
// neighbours: not retried.
func (r *Reconciler) retryDue(f Failure) bool {
	return f.errno == syscall.EINVAL && !r.now().Before(f.tried.Add(r.timing.Rescan/2))
}

// restoreValue is what is written to put an original back: an empty
// original as a newline, since some kernel files (cgroup v2's
// cpuset.cpus.exclusive) take an empty write as no write at all.
func writable(value string) string {
	if value == "" {
		return "\n"
	}
	return value
}

// logRefusals logs new permanent refusals once, one line per owner, errno
// and kind (write or restore), naming a few files: a node may have
// hundreds of kernel-managed IRQs. A file the kernel reports invalid
// (Change.Verify) gets a line of its own: its error names what it is for
// and why.
func (r *Reconciler) logRefusals(fails []Failure) {
	type group struct {
		owner   string
		errno   syscall.Errno
		restore bool
	}
	byGroup := map[group][]Failure{}
	var order []group
	for _, f := range fails {
		if f.Untrusted {
			r.log.Warnf("host files: %s: the journal's record of %s is not restored: %s (a damaged or forged journal?); the record is kept, reported while it stays", f.Owner, f.Path, f.Error)
			continue
		}
		if f.Invalid {
			r.log.Warnf("host files: %s: %s: %s (left as it is; reported while it stays so)", f.Owner, f.Path, f.Error)
			continue
		}
		g := group{f.Owner, f.errno, f.Restore}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], f)
	}
	const named = 5
	for _, g := range order {
		fs := byGroup[g]
		var paths []string
		for i, f := range fs {
			if i == named {
				paths = append(paths, fmt.Sprintf("and %d more", len(fs)-named))
				break
			}
			paths = append(paths, f.Path)
		}
		what, retry := "refused the wanted value", "not retried while it stays wanted"
		if g.restore {
			what, retry = "refused the original value (the record is kept)", "tried again by the next start"
		}
		if g.errno == syscall.EINVAL {
			// retryDue: it may depend on other files.
			retry = "tried again at each rescan, logged again only if the error changes"
		}
		hint := ""
		if fs[0].Hint != "" {
			hint = " (" + fs[0].Hint + ")"
		}
		r.log.Warnf("host files: %s: the kernel %s for %d files, %s: %s: %s%s",
			g.owner, what, len(fs), retry, strings.Join(paths, ", "), fs[0].Error, hint)
	}
}

// publish updates the Status snapshot; called at the end of a pass.
func (r *Reconciler) publish(err error) {
	records := map[string]int{}
	if r.journal != nil {
		for _, rec := range r.journal.records {
			records[rec.Owner]++
		}
	}
	fails := slices.SortedFunc(maps.Values(r.failed), func(a, b Failure) int { return strings.Compare(a.Path, b.Path) })
	r.statMu.Lock()
	defer r.statMu.Unlock()
	r.records, r.failures = records, fails
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
	return Status{Passes: r.passes.Load(), Writes: r.writes.Load(), Restores: r.restores.Load(),
		TransientErrors: r.transient.Load(), PermanentErrors: r.permanent.Load(), ForeignRestores: r.foreignRestores.Load(),
		Records: maps.Clone(r.records), Failures: slices.Clone(r.failures), LastPass: r.lastPass, LastError: r.lastError}
}

func (r *Reconciler) satisfied(ch Change, content, want string) bool {
	if s, ok := r.shown[ch.Path]; ok && ch.KernelForm && s.want == want && s.content == content {
		return true // the kernel's form of this want, as written
	}
	if ch.Satisfied != nil {
		return ch.Satisfied(content, want)
	}
	return strings.TrimSpace(content) == strings.TrimSpace(want)
}

func trim(data []byte) string { return strings.TrimRight(string(data), "\n") }
