package dra

import (
	"maps"
	"slices"

	"k8s.io/utils/cpuset"
)

// PreparedOn names the first prepared claim's request, "namespace/name/
// request" in the order of the claims' UIDs, that has some of cpus, and
// which of them it has (empty: none has). A request's CPUs are its claim's
// from Prepare to Unprepare whether or not a container has shown its
// token yet: the plugin refuses them to a device plugin grant's container
// (one the kubelet re-creates from its checkpoint after the node moved to
// DRA), whose kubelet allocation the scheduler did not count.
//
// A claim being prepared is seen too, from its placement on (see
// placing.go), with maybe true until the kubelet call's last look decided
// (takeback.go): while its placement is under way, on is what of cpus the
// placement may choose (its CPUs are not decided yet); once placed,
// recorded or not, the CPUs placed for it; and the CPUs its record from
// before gave up, which a take-back may put back. Those of them a
// container was bound to stay prepared (maybe false) until the call ends.
// Each maybe answer is counted (asked): the last look reads the CPUs
// containers hold again when one came while it read them.
//
// running says the question is for a container the runtime already runs
// (adopted at its start or at a Synchronize). A request remembered from
// the claims file at start marked unanswered (Request.Unanswered:
// written before its kubelet call was answered, and a kill -9 came before
// the write that clears the mark) that no container is bound to, that no
// Prepare has made again since and that no container showing a token has
// proved answered since (Claim.answeredBy) is not held against it: the runtime is
// the truth about where containers run, the file only a memory, which
// then may hold a Prepare the kubelet was never answered (a kill -9
// between the file's write and the call's last look, while the container
// was adopted on the CPUs placed for it). A request loaded unmarked was
// answered and is held against every other container, as before. Refused, the container would be confined
// to infra for good; adopted, it holds its CPUs, and the kubelet's next
// Prepare of the claim places the request anew (heldByAnother). A
// container being created is refused those CPUs as before: the claim
// may well have been answered, and its container may come.
//
// With no claim prepared or being prepared it allocates nothing: the
// plugin asks for every container that shows a grant, under its lock.
func (d *Driver) PreparedOn(cpus cpuset.CPUSet, running bool) (claim string, on cpuset.CPUSet, maybe bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.placing
	if p == nil && d.claimed.IsEmpty() {
		return "", cpuset.CPUSet{}, false
	}
	if !d.claimed.IsEmpty() && !d.claimed.Intersection(cpus).IsEmpty() {
		for _, uid := range slices.Sorted(maps.Keys(d.claims)) {
			c := d.claims[uid]
			for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
				req := c.Requests[name]
				r := req.CPUSet()
				if p.beingPrepared(uid, name, r) {
					continue // answered below, as maybe
				}
				if running && d.unconfirmedLocked(uid, req) {
					continue
				}
				if on := r.Intersection(cpus); !on.IsEmpty() {
					return c.Namespace + "/" + c.Name + "/" + name, on, false
				}
			}
		}
	}
	if p == nil {
		return "", cpuset.CPUSet{}, false
	}
	uids := p.sortedUIDs()
	for _, uid := range uids {
		pc := p.claims[uid]
		for _, name := range slices.Sorted(maps.Keys(pc.oldBound)) {
			if on := pc.oldBound[name].Intersection(cpus); !on.IsEmpty() {
				return pc.name + "/" + name, on, false
			}
		}
	}
	for _, uid := range uids {
		pc := p.claims[uid]
		// Placed, maybe recorded, not final: the Prepare may still
		// fail (its memory, the claims file, a running container
		// adopted meanwhile), so this is "being prepared", not
		// "prepared": advice to delete a pod for a claim that then
		// exists nowhere would be wrong, and a running container
		// would be confined for good for it. So are the CPUs its
		// record from before gave up.
		for _, set := range []map[string]cpuset.CPUSet{pc.placed, pc.old} {
			for _, name := range slices.Sorted(maps.Keys(set)) {
				if on := set[name].Intersection(cpus); !on.IsEmpty() {
					d.asked++
					return pc.name + "/" + name, on, true
				}
			}
		}
	}
	if on := p.maybe.Intersection(cpus); p.request != "" && !on.IsEmpty() {
		d.asked++
		return p.request, on, true
	}
	return "", cpuset.CPUSet{}, false
}

// unconfirmedLocked tells whether request r of claim uid is remembered
// from the claims file at start marked unanswered, bound to no container,
// and not made again by a Prepare since nor confirmed by a container
// showing a token that proves it answered (see PreparedOn, Commit,
// Claim.answeredBy). Under mu.
func (d *Driver) unconfirmedLocked(uid string, r *Request) bool {
	_, remembered := d.unconfirmed[uid]
	return remembered && r.Unanswered && r.PodUID == ""
}
