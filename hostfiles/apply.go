package hostfiles

// Applying a pass: its writes in their order (what gives something back
// first, then by Order, the Resettable ones last and only if the file
// still misses the want), each read back when the kernel may report a
// problem in the file or show the value in a form of its own.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

// apply makes the pass's writes.
func (p *passWork) apply() {
	r := p.r
	slices.SortFunc(p.writes, func(a, b write) int {
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
	for _, w := range p.writes {
		p.labels.enter(w.owner, proflabel.StepWrite)
		if w.resettable {
			// What the file holds after the pass's other p.writes.
			data, err := r.fs.ReadFile(w.path)
			if err != nil {
				delete(r.known, w.path)
				if Classify(err) == Gone {
					p.drops = append(p.drops, w.path)
				} else {
					p.transient(fmt.Errorf("%s: reading %s: %w", w.owner, w.path, err))
				}
				continue
			}
			if w.satisfied(trim(data)) {
				continue
			}
		}
		err := r.fs.WriteFile(w.path, []byte(writable(w.value)))
		if Classify(err) != Permanent { // a refused write left the file as it was
			p.wrote(w.path, w.value, err == nil)
		}
		switch {
		case err == nil:
			r.writes.Add(1)
			prev, had := r.failed[w.path]
			if had && !prev.Invalid && !prev.Restore && prev.Value == w.value {
				r.log.Infof("host files: %s: %s took the wanted value on a retry", w.owner, w.path)
			}
			delete(r.failed, w.path)
			if w.wrote != nil {
				w.wrote(w.path)
			}
			if w.verify == nil && !w.kernelForm {
				break
			}
			// The kernel takes some p.writes and then reports the state it
			// ended in (an invalid partition), or shows the value in its
			// own form: read it back.
			data, err := r.fs.ReadFile(w.path)
			if err != nil {
				delete(r.known, w.path)
				if Classify(err) != Gone {
					p.transient(fmt.Errorf("%s: reading back %s: %w", w.owner, w.path, err))
				}
				break
			}
			r.known[w.path] = trim(data)
			if w.kernelForm {
				r.shown[w.path] = shown{want: w.value, content: trim(data)}
			}
			if w.verify == nil {
				break
			}
			if had && prev.Invalid {
				r.failed[w.path] = prev // the same problem again is not new
			}
			p.verified(w.verify, w.path, w.owner, w.value, trim(data))
		case Classify(err) == Gone:
			p.drops = append(p.drops, w.path)
		case Classify(err) == Permanent:
			p.refused(Failure{Path: w.path, Owner: w.owner, Value: w.value}, err)
			if w.fresh && !w.resettable {
				// The kernel left the file as it was: nothing to restore.
				// A resettable one may have been reset since its original
				// was read: the record stays.
				p.drops = append(p.drops, w.path)
			}
		default:
			p.transient(fmt.Errorf("%s: writing %s: %w", w.owner, w.path, err))
		}
	}
}
