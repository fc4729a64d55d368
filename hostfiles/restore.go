package hostfiles

// Restoring: the files whose owner no longer wants them get their
// recorded originals back, before anything new is written, so that what
// a released owner held (a CPU in a cgroup partition) is free first.
// Which records may be restored at all is confine.go's question.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrNearest, wrapped in the error of an FS's WriteFile that puts an
// original back, says that the kernel refuses that original for now and
// that the file holds the nearest value it takes instead: a cgroup v2
// cpuset.cpus whose original is empty, which the kernel refuses while the
// cgroup has tasks, holds its parent's CPUs (package housekeeping). No
// value the file holds then says what its original was, so the record
// stays: a Source that wants the file again computes its want from the
// recorded original, and a later restore writes it exactly once the
// kernel takes it. It is not a failure (not logged as one, counted, held
// against the owner's other restores, or reported in Status.Failures):
// it is tried again at each full pass (Rescan, Flush), which also brings
// the nearest value up to date (the parent's CPUs change).
var ErrNearest = errors.New("the kernel takes only the nearest value for now")

// restore writes back the originals no Source wants any more.
func (p *passWork) restore() {
	r := p.r
	// Restore what no Source wants any more, for owners that said so, and
	// for owners this process does not have: a Source this build lacks
	// (the journal of another version) wants nothing here either. What
	// keeps a damaged or forged journal from writing just anything is the
	// roots (RestoreOnlyUnder), not the owner's name, which is as easy to
	// forge as the path.
	//
	// Only the records no one plans are copied and sorted: a pass is
	// proportional to what changed, not to the files changed so far.
	records := map[string]Record{}
	for path, rec := range r.journal.records {
		if _, wanted := p.planned[path]; !wanted {
			records[path] = rec
		}
	}
	// heldBack is, by owner (and the part of its files, for a
	// HoldBackScoper), the Order of a restore that failed for now in this
	// pass: the owner's records of lower Order wait for it (a thread's
	// affinity restored before its cgroup would be reset by the cgroup's
	// restore, its record gone).
	heldBack := map[holdKey]int{}
	restores := slices.Collect(maps.Keys(records))
	slices.SortFunc(restores, func(a, b string) int {
		if d := records[b].Order - records[a].Order; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, path := range restores {
		rec := records[path]
		if _, wanted := p.planned[path]; wanted || p.stale[path] || !p.planOK[rec.Owner] && p.sourceOf[rec.Owner] != nil {
			continue
		}
		if p.claimedByFailed(path) {
			continue // handed over to a Source that failed to plan (Claimer)
		}
		key := p.holdKey(path, rec)
		if o, held := heldBack[key]; held && rec.Order < o {
			continue
		}
		if o, ok := r.nearest[path]; ok && o == rec.Original && !p.full {
			continue // holds the nearest value: tried again at the next full pass (ErrNearest)
		}
		prev, had := r.failed[path]
		if had && prev.Restore && prev.Value == rec.Original && !r.retryDue(prev) {
			continue // refused for good; tried again by the next process (EINVAL: at the next Rescan)
		}
		if err := r.confined(path); errors.Is(err, ErrOutsideRoots) {
			p.refused(Failure{Path: path, Owner: rec.Owner, Value: rec.Original, Restore: true, Untrusted: true}, err)
			continue
		} else if err != nil {
			p.transient(fmt.Errorf("%s: restoring %s: %w", rec.Owner, path, err))
			holdBack(heldBack, key, rec)
			continue
		}
		foreign := p.sourceOf[rec.Owner] == nil
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
		if src := p.sourceOf[rec.Owner]; src != nil {
			if now := identity(src, path); reused(rec, now) {
				r.log.Infof("host files: %s: %s now belongs to %s, not %s; its recorded original %q is dropped, not restored", rec.Owner, path, now, rec.Identity, rec.Original)
				delete(r.failed, path)
				p.drops = append(p.drops, path)
				continue
			}
		}
		err := r.fs.WriteFile(path, []byte(writable(rec.Original)))
		p.wrote(path, rec.Original, err == nil)
		switch {
		case errors.Is(err, ErrNearest):
			// The record stays; so do the restores after it (the
			// file holds a value: a thread's affinity its write reset
			// gets its original back after it).
			if o, ok := r.nearest[path]; !ok || o != rec.Original {
				r.log.Infof("host files: %s: %s: %v; its original %q stays recorded and is tried again at each rescan", rec.Owner, path, err, rec.Original)
			}
			r.nearest[path] = rec.Original
			delete(r.failed, path)
		case err == nil:
			delete(r.nearest, path)
			r.restores.Add(1)
			if foreign {
				r.foreignRestores.Add(1)
			}
			if had && prev.Restore {
				r.log.Infof("host files: %s: %s took its original back on a retry", rec.Owner, path)
			}
			delete(r.failed, path)
			p.drops = append(p.drops, path)
		case Classify(err) == Gone:
			delete(r.failed, path)
			delete(r.nearest, path)
			p.drops = append(p.drops, path)
		case Classify(err) == Permanent:
			// The record stays: losing the original would be worse than
			// trying it again after a restart.
			p.refused(Failure{Path: path, Owner: rec.Owner, Value: rec.Original, Restore: true}, err)
		default:
			p.transient(fmt.Errorf("%s: restoring %s: %w", rec.Owner, path, err))
			holdBack(heldBack, key, rec)
		}
	}

}

// claimedByFailed tells whether a Source whose Plan failed in the pass
// claims path (Claimer).
func (p *passWork) claimedByFailed(path string) bool {
	for owner, src := range p.sourceOf {
		if c, ok := src.(Claimer); ok && !p.planOK[owner] && c.Claims(path) {
			return true
		}
	}
	return false
}

// holdKey is what a restore that fails for now holds back: an owner's
// records, or those of one part of its files (HoldBackScoper).
type holdKey struct{ owner, scope string }

// holdKey is the hold-back key of a record: its owner's, and the part of
// its files its Source names, if it does (an owner this process has no
// Source for holds back all its records).
func (p *passWork) holdKey(path string, rec Record) holdKey {
	if s, ok := p.sourceOf[rec.Owner].(HoldBackScoper); ok {
		return holdKey{owner: rec.Owner, scope: s.HoldBackScope(path)}
	}
	return holdKey{owner: rec.Owner}
}

// holdBack notes a restore that failed for now: the records of lower
// Order under the same key wait for a later pass.
func holdBack(heldBack map[holdKey]int, key holdKey, rec Record) {
	if _, held := heldBack[key]; !held {
		heldBack[key] = rec.Order
	}
}

// writable is what is written to put an original back: an empty
// original as a newline, since some kernel files (cgroup v2's
// cpuset.cpus.exclusive) take an empty write as no write at all.
func writable(value string) string {
	if value == "" {
		return "\n"
	}
	return value
}
