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
// placing.go), with maybe true until it is recorded: while its placement
// is under way, on is what of cpus the placement may choose (its CPUs are
// not decided yet); once placed, the CPUs placed for it.
//
// With no claim prepared or being prepared it allocates nothing: the
// plugin asks for every container that shows a grant, under its lock.
func (d *Driver) PreparedOn(cpus cpuset.CPUSet) (claim string, on cpuset.CPUSet, maybe bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.placing == nil && d.claimed.IsEmpty() {
		return "", cpuset.CPUSet{}, false
	}
	if !d.claimed.IsEmpty() && !d.claimed.Intersection(cpus).IsEmpty() {
		for _, uid := range slices.Sorted(maps.Keys(d.claims)) {
			c := d.claims[uid]
			for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
				if on := c.Requests[name].CPUSet().Intersection(cpus); !on.IsEmpty() {
					return c.Namespace + "/" + c.Name + "/" + name, on, false
				}
			}
		}
	}
	if p := d.placing; p != nil {
		for _, name := range slices.Sorted(maps.Keys(p.placed)) {
			// Placed, not recorded: the Prepare may still fail (its
			// memory, its CDI spec, the claims file), so this is
			// "being prepared", not "prepared": advice to delete a pod
			// for a claim that then exists nowhere would be wrong.
			if on := p.placed[name].Intersection(cpus); !on.IsEmpty() {
				return name, on, true
			}
		}
		if on := p.maybe.Intersection(cpus); p.request != "" && !on.IsEmpty() {
			return p.request, on, true
		}
	}
	return "", cpuset.CPUSet{}, false
}
