package hostfiles

// Refusals: the files the kernel refused for good (or reports invalid),
// how they are noted once, when one is tried again, how they are logged,
// and what the journal keeps of them for the audit.

import (
	"fmt"
	"strings"
	"syscall"
	"time"
)

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

// RestoreRefused begins the journal's reason for a file whose original
// the kernel refused to take back: the file stays changed. The journal
// keeps a refusal as its text only (Journal.SetRefused), and an IRQ's
// reason carries the same hint whether the plugin's value or the original
// was refused; this is how the audit tells a file left changed from a
// kernel-managed IRQ it never moved. Journals of builds before it lack it.
const RestoreRefused = "restoring the original: "

// refused notes a permanent refusal. It is counted and logged when it is
// new: a retry (retryDue) refused the same way is not.
func (p *passWork) refused(f Failure, err error) {
	r := p.r
	f.Error, f.errno, f.tried = err.Error(), errnoOf(err), r.now()
	if ex, ok := p.sourceOf[f.Owner].(Explainer); ok && !f.Untrusted {
		f.Hint = ex.Explain(f.Path, err)
	}
	if prev, ok := r.failed[f.Path]; !ok || prev.Value != f.Value || prev.Restore != f.Restore || prev.Invalid || prev.errno != f.errno || prev.Untrusted != f.Untrusted {
		r.permanent.Add(1)
		p.newlyFails = append(p.newlyFails, f)
	}
	r.failed[f.Path] = f
}

// verified checks a file that meets its want (Change.Verify): a problem
// is counted and logged when it is new (another value, another reason),
// not at every pass it lasts.
func (p *passWork) verified(verify func(string) error, path, owner, want, content string) {
	r := p.r
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
		p.newlyFails = append(p.newlyFails, f)
	}
	r.failed[path] = f
}

// keepRefusals forgets the refusals that are history, logs the new ones
// and keeps the rest in the journal for the audit.
func (p *passWork) keepRefusals() {
	r := p.r
	// A refusal of a file nobody wants and nobody changed is history.
	for path, f := range r.failed {
		if _, wanted := p.planned[path]; !wanted && !f.Restore {
			delete(r.failed, path)
		} else if _, rec := r.journal.Get(path); f.Restore && !rec {
			delete(r.failed, path)
		}
	}
	r.logRefusals(p.newlyFails)
	kept := make(map[string]string, len(r.failed))
	for path, f := range r.failed {
		kept[path] = f.Error
		if f.Restore && !f.Untrusted {
			kept[path] = RestoreRefused + f.Error
		}
		if f.Hint != "" {
			kept[path] += " (" + f.Hint + ")"
		}
	}
	if err := r.journal.SetRefused(kept); err != nil {
		r.log.Warnf("host files: keeping the refused files for the audit: %v", err)
	}
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
