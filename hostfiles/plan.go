package hostfiles

// Planning a pass: each Source's Plan, checked against the journal and
// the files as they are, becomes the writes of the pass and the
// originals to record; what a file already meets is left alone.

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

// plan asks every Source for its Plan and turns each Change into a write,
// a record of its original, or nothing.
func (p *passWork) plan() {
	r := p.r
	for _, src := range r.sources {
		owner := src.Owner()
		p.labels.enter(owner, proflabel.StepPlan)
		p.sourceOf[owner] = src
		plan, err := src.Plan()
		if err != nil {
			p.transient(fmt.Errorf("%s: planning: %w", owner, err))
			continue
		}
		p.planOK[owner] = true
		p.pending = p.pending || plan.Pending
		if plan.Before != nil {
			p.befores = append(p.befores, plan.Before)
		}
		if plan.After != nil {
			p.afters = append(p.afters, plan.After)
		}
		for _, ch := range plan.Changes {
			if other, dup := p.claimed[ch.Path]; dup {
				p.transient(fmt.Errorf("%s and %s both want to change %s; %s's change is ignored", other, owner, ch.Path, owner))
				continue
			}
			p.claimed[ch.Path] = owner
			p.planned[ch.Path] = owner
			delete(r.nearest, ch.Path) // wanted again: written from its recorded original
			rec, journaled := r.journal.Get(ch.Path)
			if !plan.Reread && p.settled(ch, rec, journaled) {
				continue
			}
			// What the file belongs to (Identifier) is asked only when it
			// is needed: a record to check or to make. Most wanted files
			// meet their want as they are (an IRQ whose affinity avoids
			// the banned CPUs) and need neither.
			ident, identified := "", false
			identOf := func() string {
				if !identified {
					ident, identified = identity(src, ch.Path), true
				}
				return ident
			}
			if journaled && reused(rec, identOf()) {
				// Its original is another object's: the file's content
				// now is this one's.
				r.log.Infof("host files: %s: %s now belongs to %s, not %s; its recorded original %q is dropped, and what it holds now is its original", owner, ch.Path, identOf(), rec.Identity, rec.Original)
				p.drops = append(p.drops, ch.Path)
				p.stale[ch.Path] = true
				journaled = false
			}
			original := rec.Original
			if !journaled {
				content, err := p.read(ch.Path)
				if err != nil {
					if Classify(err) != Gone {
						p.transient(fmt.Errorf("%s: reading %s: %w", owner, ch.Path, err))
					}
					continue
				}
				original = content
				if ch.Original != nil {
					original = ch.Original(original)
				}
			}
			want, err := ch.Want(original)
			if err != nil {
				p.refused(Failure{Path: ch.Path, Owner: owner}, err)
				continue
			}
			if ch.Resettable && r.satisfied(ch, original, want) {
				// Recorded all the same, and checked again after the
				// pass's other p.writes, which may reset it.
				if !journaled {
					p.fresh[ch.Path] = Record{Original: original, Owner: owner, Order: ch.Order, Identity: identOf()}
				}
				p.writes = append(p.writes, r.resettableWrite(ch, want, owner, !journaled))
				continue
			}
			if r.satisfied(ch, original, want) {
				// The original meets the want: a file never changed is
				// left alone, a changed one gets its original back.
				delete(p.planned, ch.Path)
				if !journaled {
					delete(r.failed, ch.Path)
				}
				continue
			}
			if f, ok := r.failed[ch.Path]; ok && !f.Restore && !f.Invalid && f.Value == want && !r.retryDue(f) {
				continue // refused for good; not retried (EINVAL: not yet)
			}
			if !journaled {
				p.fresh[ch.Path] = Record{Original: original, Owner: owner, Order: ch.Order, Identity: identOf()}
				if ch.Resettable {
					p.writes = append(p.writes, r.resettableWrite(ch, want, owner, true))
					continue
				}
				p.writes = append(p.writes, write{path: ch.Path, value: want, owner: owner, order: ch.Order, fresh: true, verify: ch.Verify, kernelForm: ch.KernelForm, wrote: ch.Wrote})
				continue
			}
			if ch.Resettable {
				// Read when it is written, after the others.
				p.writes = append(p.writes, r.resettableWrite(ch, want, owner, false))
				continue
			}
			content, err := p.read(ch.Path)
			if err != nil {
				if Classify(err) == Gone {
					p.drops = append(p.drops, ch.Path)
				} else {
					p.transient(fmt.Errorf("%s: reading %s: %w", owner, ch.Path, err))
				}
				continue
			}
			if r.satisfied(ch, content, want) {
				p.verified(ch.Verify, ch.Path, owner, want, content)
				continue
			}
			gives := ch.Gives != nil && ch.Gives(content, want)
			p.writes = append(p.writes, write{path: ch.Path, value: want, owner: owner, order: ch.Order, gives: gives, verify: ch.Verify, kernelForm: ch.KernelForm, wrote: ch.Wrote})
		}
	}
}

// read reads a wanted file for the plan, and keeps what it holds as
// known (settled); it returns that content (trimmed). A content that is
// what was known already is that string, not a new one: the files a pass
// reads every time (those with Verify) mostly read the same, and each
// read made the content three times (issue 45: a pass's allocations grew
// with the partitions). In a rescan, which starts what is known anew, it
// is what was known before the rescan (passWork.before): a rescan reads
// every wanted file, most of them unchanged, and made a string for each.
func (p *passWork) read(path string) (string, error) {
	data, err := p.r.fs.ReadFile(path)
	if err != nil {
		delete(p.r.known, path)
		return "", err
	}
	data = bytes.TrimRight(data, "\n")
	if known, ok := p.r.known[path]; ok && known == string(data) {
		return known, nil
	}
	content, ok := p.before[path]
	if !ok || content != string(data) {
		content = string(data)
	}
	p.r.known[path] = content
	return content, nil
}

// settled tells, in a pass that is not a rescan, whether a change needs
// nothing done by what its file was known to hold at the end of an
// earlier pass (Reconciler.known), without reading it: its want, worked
// out again from the same original, is met by that content, or it is
// refused for good with the same want and not due a retry. It then does
// the bookkeeping the full plan does for those outcomes. Anything else
// (a write, an original to record, a want that fails) is left to the full
// plan, which reads the file and asks its identity. Changes with Verify
// (the kernel may find a partition invalid at any time) and Resettable
// ones (any cgroup write may reset them) are always read. A file changed
// behind the plugin's back since it was known is drift: the rescan, which
// reads every file, corrects it.
func (p *passWork) settled(ch Change, rec Record, journaled bool) bool {
	r := p.r
	if p.full || ch.Verify != nil || ch.Resettable {
		return false
	}
	content, known := r.known[ch.Path]
	if !known {
		return false
	}
	original := rec.Original
	if !journaled {
		original = content
		if ch.Original != nil {
			original = ch.Original(original)
		}
	}
	want, err := ch.Want(original)
	if err != nil {
		return false
	}
	if r.satisfied(ch, original, want) {
		if journaled {
			return false // it gets its original back: the full plan restores it
		}
		delete(p.planned, ch.Path)
		delete(r.failed, ch.Path)
		p.skipped++
		return true
	}
	if f, ok := r.failed[ch.Path]; ok && !f.Restore && !f.Invalid && f.Value == want && !r.retryDue(f) {
		p.skipped++
		return true
	}
	if journaled && r.satisfied(ch, content, want) {
		p.skipped++
		return true
	}
	return false
}

// resettableWrite is the write of a Resettable change, made after every
// other write of the pass if the file does not meet want then.
func (r *Reconciler) resettableWrite(ch Change, want, owner string, fresh bool) write {
	return write{path: ch.Path, value: want, owner: owner, order: ch.Order, fresh: fresh, resettable: true, wrote: ch.Wrote,
		satisfied: func(content string) bool { return r.satisfied(ch, content, want) }}
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
