package dra

// The end of a kubelet call's Prepares: the last look, once the claims
// file holds the call's claims, at the CPUs containers hold, and the
// taking back of the call's claims when it finds their new CPUs taken,
// when the claims file cannot be written, or when a claim's placement no
// longer fits. A claim is put back on its record from before only where
// no container was placed meanwhile; else it is released, and the
// kubelet's retry places it anew.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/cpuset"
)

// settleRounds bounds settle's reads: past it, it decides as if every CPU
// in question were held (a container is adopted on a claim's CPUs being
// prepared a few times a node's life, not at every read).
const settleRounds = 8

// settle calls decide under mu with the CPUs containers hold in pools,
// read so that no container can have been placed on CPUs being prepared
// (placing.go) since: the plugin places a container under its lock and
// asks PreparedOn under it first, which counts each "being prepared"
// answer (asked); a read with no answer while it ran saw every container
// placed so far, and decide, under mu, changes the note before any later
// PreparedOn answers. quiet false: no such read was had, and decide must
// take every CPU in question as held. decide must not call Pools.
func (d *Driver) settle(pools []string, decide func(held map[string]cpuset.CPUSet, quiet bool)) {
	for round := 1; ; round++ {
		d.mu.Lock()
		seen := d.asked
		d.mu.Unlock()
		held := make(map[string]cpuset.CPUSet, len(pools))
		for _, pool := range pools {
			held[pool] = d.pools.Held(pool)
		}
		d.mu.Lock()
		if quiet := d.asked == seen; quiet || round == settleRounds {
			decide(held, quiet)
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
}

// poolsOf are the pools of the requests of these claims' records now and
// from before the call (undo).
func (d *Driver) poolsOf(undo map[string]*Claim) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for uid, before := range undo {
		for _, c := range []*Claim{before, d.claims[uid]} {
			if c == nil {
				continue
			}
			for _, r := range c.Requests {
				if !slices.Contains(out, r.Pool) {
					out = append(out, r.Pool)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// restoreOf is the record to put back for a claim whose record from
// before the call is before and now cur: before, with each request cur
// kept (same token) bound to the container cur has bound to it (which may
// have bound it while the lock was free, also after this call unbound
// another), else as it was. Nil when before is nil, or when a request of before that
// cur gave up and no container was bound to is on CPUs a container holds
// now (quiet false: may hold): a container adopted on them while they
// were being prepared (see placing.go). Put back there, the claim would
// be prepared on a running container's CPUs; released, the kubelet's retry
// places it anew. A request bound to a container stayed prepared: nobody
// else was placed on its CPUs.
func restoreOf(before, cur *Claim, held map[string]cpuset.CPUSet, quiet bool) (restore *Claim, taken []string) {
	if before == nil {
		return nil, nil
	}
	restore = before.clone()
	for _, name := range slices.Sorted(maps.Keys(before.Requests)) {
		old := before.Requests[name]
		if r := cur.request(name); r != nil && r.Token == old.Token {
			// Kept: bound to the container bound to it now, which
			// may have bound it meanwhile, also over an unbinding of
			// this call (that container runs on its CPUs); unbound
			// now, bound as before (an unbinding of this call is
			// undone).
			if r.PodUID != "" {
				restore.Requests[name].PodUID, restore.Requests[name].Container = r.PodUID, r.Container
			}
			continue
		}
		if old.PodUID != "" {
			continue
		}
		if !quiet {
			taken = append(taken, fmt.Sprintf("request %s: CPUs %q (the CPUs containers hold kept changing while they were read)", name, old.CPUs))
		} else if on := held[old.Pool].Intersection(old.CPUSet()); !on.IsEmpty() {
			taken = append(taken, fmt.Sprintf("request %s: CPUs %q (%s held by a running container)", name, old.CPUs, on.String()))
		}
	}
	if len(taken) > 0 {
		return nil, taken
	}
	return restore, nil
}

// takeBackLocked puts the claims of undo (claim UID -> record before the
// call, nil: none) back as restoreOf says, ends their note, and returns
// their records before and after, and why those it released could not be
// put back, by UID. Under mu, in settle's decide.
func (d *Driver) takeBackLocked(undo map[string]*Claim, held map[string]cpuset.CPUSet, quiet bool) (now, restored map[string]*Claim, released map[string][]string) {
	now, restored, released = map[string]*Claim{}, map[string]*Claim{}, map[string][]string{}
	for _, uid := range slices.Sorted(maps.Keys(undo)) {
		cur := d.claims[uid]
		if cur != nil {
			now[uid] = cur.clone()
		}
		r, taken := restoreOf(undo[uid], cur, held, quiet)
		if len(taken) > 0 {
			released[uid] = taken
		}
		restored[uid] = r
		d.setLocked(uid, r)
		d.dropPlacingLocked(uid)
	}
	d.gen++
	return now, restored, released
}

// takeBack puts claims back (see takeBackLocked), memory included, and
// says which it released; it returns those, by UID.
func (d *Driver) takeBack(undo map[string]*Claim) map[string][]string {
	var now, restored, released map[string]*Claim
	var why map[string][]string
	d.settle(d.poolsOf(undo), func(held map[string]cpuset.CPUSet, quiet bool) {
		now, restored, why = d.takeBackLocked(undo, held, quiet)
	})
	released = map[string]*Claim{}
	for uid := range why {
		released[uid] = undo[uid]
	}
	d.gaveBack(undo, now, restored, released, why)
	return why
}

// gaveBack gives back the memory of the claims taken back (now) and
// reserves that of their records put back (restored); a released claim's
// record from before gives its memory back too. It logs the releases.
func (d *Driver) gaveBack(undo, now, restored, released map[string]*Claim, why map[string][]string) {
	for _, uid := range slices.Sorted(maps.Keys(undo)) {
		d.releaseAll(uid, now[uid])
		if b := released[uid]; b != nil {
			d.releaseAll(uid, b)
			d.log.Warnf("DRA: claim %s/%s (%s) released, not put back on its CPUs from before: %s; its next Prepare places it anew",
				b.Namespace, b.Name, uid, strings.Join(why[uid], "; "))
		}
		d.reserveAll(uid, restored[uid])
	}
	if len(released) > 0 {
		// The claims file may still hold a released claim: written
		// with the next write, by the writer if no Prepare comes.
		d.signal(d.dirty)
	}
}

// lastLook ends the call's note once the claims file holds its claims:
// it reads the CPUs containers hold (settle) and, when none of the
// claims' new CPUs is held, the claims are prepared from then on (a
// running grant container adopted later is refused for them); when some
// are (a running container adopted while they were being prepared, not
// refused: it would have been confined for good), every claim of the call
// is taken back under the same lock. It returns, by claim UID, what of its
// new CPUs containers hold (none: nil), the claims released, and whether
// the CPUs containers hold were read settled (false: settle gave up, and
// every new CPU counted as held although no container may hold one).
func (d *Driver) lastLook(undo map[string]*Claim) (taken, released map[string][]string, settled bool) {
	d.mu.Lock()
	none := d.placing == nil
	d.mu.Unlock()
	if none {
		return nil, nil, true // every claim of the call kept as it was: prepared all along
	}
	var now, restored map[string]*Claim
	d.settle(d.poolsOf(undo), func(held map[string]cpuset.CPUSet, quiet bool) {
		settled = quiet
		taken = d.takenLocked(held, quiet)
		if len(taken) == 0 {
			d.stopPlacingLocked()
			return
		}
		now, restored, released = d.takeBackLocked(undo, held, quiet)
		d.stopPlacingLocked()
	})
	if len(taken) == 0 {
		return nil, nil, settled
	}
	rel := map[string]*Claim{}
	for uid := range released {
		rel[uid] = undo[uid]
	}
	d.gaveBack(undo, now, restored, rel, released)
	return taken, released, settled
}

// takenLocked is what of the new CPUs of the note's claims, recorded,
// containers hold, by claim UID (quiet false: everything, and the reason
// says the reads did not settle: no running container need hold any).
// Under mu.
func (d *Driver) takenLocked(held map[string]cpuset.CPUSet, quiet bool) map[string][]string {
	p := d.placing
	if p == nil {
		return nil
	}
	var taken map[string][]string
	for _, uid := range p.sortedUIDs() {
		c := d.claims[uid]
		if c == nil {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
			r := c.Requests[name]
			if !p.beingPrepared(uid, name, r.CPUSet()) {
				continue // kept from before: prepared all along
			}
			why := "were taken by a running container while it was prepared"
			on := held[r.Pool].Intersection(r.CPUSet())
			if !quiet {
				// Not known to be taken: a container may have
				// been placed on them, so they are not kept.
				on, why = r.CPUSet(), "could not be checked against the CPUs containers hold: those kept changing while they were read"
			}
			if on.IsEmpty() {
				continue
			}
			if taken == nil {
				taken = map[string][]string{}
			}
			taken[uid] = append(taken[uid], fmt.Sprintf("request %s: CPUs %q %s", name, on.String(), why))
		}
	}
	return taken
}

// takenBackAfterSave writes the claims file again after the last look
// took the call's claims back (taken), and fails each claim's Prepare: the
// kubelet retries, and the retry places them over what containers hold
// then. All of them, not only those whose CPUs were taken: one of the
// call's claims may have been placed on CPUs another of them had before,
// which that one's taking back would give it again.
// settled false: the last look gave up reading the CPUs containers hold,
// and no running container need have taken any.
func (d *Driver) takenBackAfterSave(done []*resourceapi.ResourceClaim, taken, released map[string][]string, settled bool, out map[types.UID]kubeletplugin.PrepareResult) {
	if err := d.save(); err != nil {
		// Taken back in memory: the writer carries it. Until then a
		// restart would remember claims nobody knows the tokens of,
		// and their next Prepare looks at the CPUs containers hold.
		d.log.Warnf("DRA: %v (claims taken back after the last look found their new CPUs taken or could not check them; written again in the background)", err)
		d.signal(d.dirty)
	}
	d.signal(d.changed)
	var names []string
	for _, claim := range done {
		if _, ok := taken[string(claim.UID)]; ok && !slices.Contains(names, claim.Namespace+"/"+claim.Name) {
			names = append(names, claim.Namespace+"/"+claim.Name)
		}
	}
	for _, claim := range done {
		uid := string(claim.UID)
		var err error
		if why, ok := taken[uid]; ok {
			err = fmt.Errorf("claim %s/%s: %s; the kubelet retries", claim.Namespace, claim.Name, strings.Join(why, "; "))
		} else if settled {
			err = fmt.Errorf("claim %s/%s: taken back with claim %s of the same Prepare, whose CPUs a running container took while they were prepared; the kubelet retries",
				claim.Namespace, claim.Name, strings.Join(names, ", "))
		} else {
			err = fmt.Errorf("claim %s/%s: taken back with claim %s of the same Prepare, whose CPUs could not be checked against the CPUs containers hold (those kept changing while they were read); the kubelet retries",
				claim.Namespace, claim.Name, strings.Join(names, ", "))
		}
		if why, ok := released[uid]; ok {
			err = fmt.Errorf("%w (released, not put back on its CPUs from before: %s)", err, strings.Join(why, "; "))
		}
		d.log.Warnf("DRA: preparing %v", err)
		out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
	}
}
