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
// placing.go), with maybe true until the claims file holds it and the
// Prepare's last look found its CPUs free of containers: while its
// placement is under way, on is what of cpus the placement may choose (its
// CPUs are not decided yet); once placed, recorded or not, the CPUs placed
// for it. A request of it kept from its earlier Prepare is prepared.
//
// With no claim prepared or being prepared it allocates nothing: the
// plugin asks for every container that shows a grant, under its lock.
func (d *Driver) PreparedOn(cpus cpuset.CPUSet) (claim string, on cpuset.CPUSet, maybe bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.placing == nil && d.claimed.IsEmpty() {
		return "", cpuset.CPUSet{}, false
	}
	p := d.placing
	if !d.claimed.IsEmpty() && !d.claimed.Intersection(cpus).IsEmpty() {
		for _, uid := range slices.Sorted(maps.Keys(d.claims)) {
			c := d.claims[uid]
			for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
				r := c.Requests[name].CPUSet()
				if p.beingPrepared(uid, name, r) {
					continue // answered below, as maybe
				}
				if on := r.Intersection(cpus); !on.IsEmpty() {
					return c.Namespace + "/" + c.Name + "/" + name, on, false
				}
			}
		}
	}
	if p != nil {
		for _, uid := range slices.Sorted(maps.Keys(p.placed)) {
			pc := p.placed[uid]
			for _, name := range slices.Sorted(maps.Keys(pc.requests)) {
				// Placed, maybe recorded, not in the claims file yet:
				// the Prepare may still fail (its memory, the claims
				// file, a running container adopted meanwhile), so
				// this is "being prepared", not "prepared": advice to
				// delete a pod for a claim that then exists nowhere
				// would be wrong, and a running container would be
				// confined for good for it.
				if on := pc.requests[name].Intersection(cpus); !on.IsEmpty() {
					return pc.name + "/" + name, on, true
				}
			}
		}
		if on := p.maybe.Intersection(cpus); p.request != "" && !on.IsEmpty() {
			return p.request, on, true
		}
	}
	return "", cpuset.CPUSet{}, false
}

// beingPrepared tells whether the record of request name of claim uid,
// on cpus, is what the Prepare under way placed and has not finished yet
// (p nil: none is). Not yet recorded, the record is the claim's from
// before, whose CPUs stay prepared until the new one replaces it.
func (p *placing) beingPrepared(uid, name string, cpus cpuset.CPUSet) bool {
	if p == nil {
		return false
	}
	pc := p.placed[uid]
	if pc == nil {
		return false
	}
	placed, ok := pc.requests[name]
	return ok && cpus.IsSubsetOf(placed)
}
