package dra

// A claim's new CPUs taken by a running container while it was being
// prepared: the last look of a Prepare, once the claims file holds the
// call's claims, and their taking back when it finds one.

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// takeBack puts the claims of a kubelet call back as they were before it
// (undo: claim UID -> record before, nil for none), memory included, and
// forgets what the call placed, under the same lock: nobody knows the
// new tokens yet.
func (d *Driver) takeBack(undo map[string]*Claim) {
	d.mu.Lock()
	now := map[string]*Claim{}
	for uid, before := range undo {
		if c, ok := d.claims[uid]; ok {
			now[uid] = c.clone()
		}
		d.setLocked(uid, before)
	}
	d.stopPlacingLocked()
	d.gen++
	d.mu.Unlock()
	for uid, before := range undo {
		d.releaseAll(uid, now[uid])
		d.reserveAll(uid, before)
	}
}

// takenWhilePrepared ends the "being prepared" of the call's claims (the
// claims file holds them now, see finishPlacing) and then looks, a last
// time, at the CPUs containers hold: a running grant container the
// plugin adopted while they were being prepared was not refused for them
// (it would have been confined for good, for a claim that might not be)
// and may run on CPUs a placement chose just before. It returns, by claim
// UID, what of its new CPUs containers hold (none: nil).
func (d *Driver) takenWhilePrepared() map[string][]string {
	reqs := d.finishPlacing()
	if len(reqs) == 0 {
		return nil
	}
	slices.SortFunc(reqs, func(a, b placedRequest) int {
		return strings.Compare(a.uid+"/"+a.request, b.uid+"/"+b.request)
	})
	var taken map[string][]string
	for _, r := range reqs {
		if held := d.pools.Held(r.pool).Intersection(r.cpus); !held.IsEmpty() {
			if taken == nil {
				taken = map[string][]string{}
			}
			taken[r.uid] = append(taken[r.uid], fmt.Sprintf("request %s: CPUs %q were taken by a running container while it was prepared", r.request, held.String()))
		}
	}
	return taken
}

// takenBackAfterSave takes back every claim of the call (undo, as a failed
// claims write does) when a running container took new CPUs of some
// (taken), writes the claims file again, and fails each claim's Prepare:
// the kubelet retries, and the retry places them over what containers
// hold then. All of them, not only those whose CPUs were taken: one of
// the call's claims may have been placed on CPUs another of them had
// before, which that one's taking back would give it again.
func (d *Driver) takenBackAfterSave(undo map[string]*Claim, done []*resourceapi.ResourceClaim, taken map[string][]string, out map[types.UID]kubeletplugin.PrepareResult) {
	d.takeBack(undo)
	if err := d.save(); err != nil {
		// Taken back in memory: the writer carries it. Until then a
		// restart would remember claims nobody knows the tokens of.
		d.log.Warnf("DRA: %v (claims taken back after a running container took their CPUs; written again in the background)", err)
		d.signal(d.dirty)
	}
	d.signal(d.changed)
	var names []string
	for _, claim := range done {
		if _, ok := taken[string(claim.UID)]; ok {
			names = append(names, claim.Namespace+"/"+claim.Name)
		}
	}
	for _, claim := range done {
		var err error
		if why, ok := taken[string(claim.UID)]; ok {
			err = fmt.Errorf("claim %s/%s: %s; the kubelet retries", claim.Namespace, claim.Name, strings.Join(why, "; "))
		} else {
			err = fmt.Errorf("claim %s/%s: taken back with claim %s of the same Prepare, whose CPUs a running container took while they were prepared; the kubelet retries",
				claim.Namespace, claim.Name, strings.Join(slices.Compact(names), ", "))
		}
		d.log.Warnf("DRA: preparing %v", err)
		out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
	}
}
