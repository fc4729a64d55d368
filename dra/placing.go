package dra

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// A Prepare places a claim's CPUs under the plugin's lock (Pools.Place)
// and records the claim under the driver's, later: the two locks are never
// held together (mu is never held while calling out). In between, the
// CPUs are no container's and no recorded claim's, and a container the
// plugin places meanwhile under its lock could take them: one showing a
// device plugin grant of the era before the node moved to DRA is pinned
// on the grant's CPUs, checked against the claims by PreparedOn only. So
// the claim being placed is seen by PreparedOn from before its placement
// on: the CPUs the placement under way may choose (the NUMA node's CPUs
// no other claim has) until it returned, then exactly the CPUs it chose,
// until the claim is recorded (or the Prepare fails).

// placing is the claim a Prepare is placing, under mu. Prepares are
// serialized (prepareMu), so there is at most one.
type placing struct {
	// placed is what the claim's placements chose, not recorded yet, by
	// request ("namespace/name/request").
	placed map[string]cpuset.CPUSet
	// request is the request whose placement is under way ("": none),
	// and maybe the CPUs it may choose.
	request string
	maybe   cpuset.CPUSet
}

// startPlacing tells that the placement of request, which may choose any
// of maybe, starts now.
func (d *Driver) startPlacing(request string, maybe cpuset.CPUSet) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.placing == nil {
		d.placing = &placing{placed: map[string]cpuset.CPUSet{}}
	}
	d.placing.request, d.placing.maybe = request, maybe
}

// placed tells that the placement under way returned cpus (empty when it
// failed).
func (d *Driver) placed(cpus cpuset.CPUSet) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.placing
	if p == nil || p.request == "" {
		return
	}
	if !cpus.IsEmpty() {
		p.placed[p.request] = cpus.Union(p.placed[p.request])
	}
	p.request, p.maybe = "", cpuset.New()
}

// stopPlacing forgets the claim being placed: it was recorded (under mu,
// with stopPlacingLocked, so that it is never seen by neither), or its
// Prepare failed.
func (d *Driver) stopPlacing() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopPlacingLocked()
}

func (d *Driver) stopPlacingLocked() { d.placing = nil }

// nodeCPUs is every CPU of NUMA node numa, online or not: what a placement
// on that node may choose, also should a CPU come online while it runs.
func nodeCPUs(topo *sysfs.Topology, numa int) cpuset.CPUSet {
	return topo.AllCPUsWhere(func(c sysfs.CPU) bool { return c.NUMA == numa })
}
