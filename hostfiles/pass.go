package hostfiles

// One pass of the Reconciler, in the order that makes it safe to kill at
// any point: plan (plan.go), restore what no owner wants any more
// (restore.go), record the new originals in the journal, write
// (apply.go), then keep the refusals (refusals.go). The journal's
// bookkeeping is here, between the steps, because its order is the
// guarantee: a file is written only once its original is on disk, and a
// record is dropped only once its original is back.

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

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
	// wrote is Change.Wrote.
	wrote func(path string)
}

// shown is what a file read right after a write of want.
type shown struct{ want, content string }

// passWork is what the steps of one pass share: what the Sources planned,
// the writes and journal changes that follow from it, and the problems
// met on the way.
type passWork struct {
	r          *Reconciler
	labels     *passLabels
	problems   []error
	claimed    map[string]string // path → owner, for every change
	planned    map[string]string // path → owner, for changes to keep
	planOK     map[string]bool   // owners whose plan succeeded
	sourceOf   map[string]Source
	writes     []write
	fresh      map[string]Record
	drops      []string
	befores    []func() error
	afters     []func() error
	newlyFails []Failure
	pending    bool
	stale      map[string]bool // records of a reused path, dropped
	// full: a rescan, which reads every wanted file (settled); skipped
	// counts the changes a pass that is not one settled without a read.
	full    bool
	skipped int
	// before is, in a rescan, what was known before it started anew
	// (Reconciler.known): read only for the strings of unchanged files.
	before map[string]string
	// touched counts, by directory, the files the pass wrote or
	// restored (or tried to), and written names the files written with
	// success: what a directory's other files were known to hold is
	// forgotten, and what a written file holds too when its directory
	// saw other writes (forget).
	touched map[string]int
	written map[string]bool
}

// pass brings the host files to the Sources' plans: it plans, restores
// what no owner wants any more, records the new originals (and drops the
// restored ones) in one journal write, runs the Before hooks, writes, and
// runs the After hooks. Restores come first so that what a released
// owner held (a CPU in a cgroup partition) is free before anything new
// claims it. It returns the transient errors, joined.
//
// A full pass (a rescan, Flush) reads every wanted file; one that is not
// (a kick's, a retry's) takes the files known to meet their want as they
// were (settled) and reads only the others.
//
// labels, when not nil, label the goroutine by the Source and step that
// run (the worker's goroutine; Flush's caller is left as it is).
func (r *Reconciler) pass(full bool, labels *passLabels) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || !r.ready.Load() {
		return nil
	}
	defer labels.leave()
	r.passes.Add(1)
	var before map[string]string
	if full {
		r.fullPasses.Add(1)
		// The rescan starts what is known anew; what was known gives the
		// strings of the files that read the same (passWork.read).
		before = r.known
		r.known = make(map[string]string, len(before))
		for _, src := range r.sources {
			if rs, ok := src.(Rescanner); ok {
				labels.enter(src.Owner(), proflabel.StepRescan)
				rs.Rescan()
			}
		}
	} else {
		r.kickedPasses.Add(1)
	}
	p := &passWork{r: r, labels: labels, claimed: map[string]string{}, planned: map[string]string{}, planOK: map[string]bool{},
		sourceOf: map[string]Source{}, fresh: map[string]Record{}, stale: map[string]bool{}, full: full, before: before, touched: map[string]int{}, written: map[string]bool{}}
	p.plan()
	labels.enter("", proflabel.StepRestore)
	p.restore()

	// Record first: a file is written only once its original is on disk.
	labels.enter("", proflabel.StepJournal)
	if err := r.journal.Commit(p.fresh, p.drops); err != nil {
		p.transient(fmt.Errorf("recording %d original values and dropping %d restored ones: %w; the new values are not written", len(p.fresh), len(p.drops), err))
		p.writes = slices.DeleteFunc(p.writes, func(w write) bool { return w.fresh })
	}
	p.drops = nil
	labels.enter("", proflabel.StepHooks)
	for _, f := range p.befores {
		if err := f(); err != nil {
			p.transient(err)
		}
	}
	p.apply()
	labels.enter("", proflabel.StepJournal)
	if err := r.journal.Commit(nil, p.drops); err != nil {
		p.transient(fmt.Errorf("dropping %d records of unchanged files: %w", len(p.drops), err))
	}
	labels.enter("", proflabel.StepHooks)
	for _, f := range p.afters {
		if err := f(); err != nil {
			p.transient(err)
		}
	}
	labels.enter("", proflabel.StepPublish)
	for path := range r.nearest {
		if _, rec := r.journal.Get(path); !rec {
			delete(r.nearest, path) // dropped otherwise (reused, gone)
		}
	}
	for path := range r.shown {
		if _, wanted := p.claimed[path]; !wanted {
			delete(r.shown, path) // the want is gone; the next write reads anew
		}
	}
	p.forget()
	r.settledSkips.Add(uint64(p.skipped))
	p.keepRefusals()
	err := errors.Join(p.problems...)
	if err != nil {
		r.log.Warnf("host files: pass incomplete, retrying with backoff: %v", err)
	}
	r.publish(err)
	if err == nil && p.pending {
		return errPending
	}
	return err
}

// forget drops what is known of files that no longer tell what they hold:
// those no Source wanted in this pass (a want that comes back reads its
// file anew), those whose Source failed to plan, and the other files of a
// directory the pass wrote or restored in (a cpufreq policy's governor
// may reset its preference and frequencies; the kernel does not say
// which).
func (p *passWork) forget() {
	for path := range p.r.known {
		_, wanted := p.claimed[path]
		n := p.touched[filepath.Dir(path)]
		if !wanted || n > 1 || n == 1 && !p.written[path] {
			delete(p.r.known, path)
		}
	}
}

// wrote notes that the pass wrote or restored path (ok: with success, and
// it now holds content); see forget.
func (p *passWork) wrote(path, content string, ok bool) {
	p.touched[filepath.Dir(path)]++
	if ok {
		p.r.known[path] = content
		p.written[path] = true
	} else {
		delete(p.r.known, path)
	}
}

// transient notes a problem that makes the pass fail for now: it is
// retried with backoff.
func (p *passWork) transient(err error) {
	p.r.transient.Add(1)
	p.problems = append(p.problems, err)
}
