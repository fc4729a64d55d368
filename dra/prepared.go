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
// With no claim prepared it allocates nothing: the plugin asks for every
// container that shows a grant, under its lock.
func (d *Driver) PreparedOn(cpus cpuset.CPUSet) (string, cpuset.CPUSet) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.claimed.IsEmpty() || d.claimed.Intersection(cpus).IsEmpty() {
		return "", cpuset.CPUSet{}
	}
	for _, uid := range slices.Sorted(maps.Keys(d.claims)) {
		c := d.claims[uid]
		for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
			if on := c.Requests[name].CPUSet().Intersection(cpus); !on.IsEmpty() {
				return c.Namespace + "/" + c.Name + "/" + name, on
			}
		}
	}
	return "", cpuset.New()
}
