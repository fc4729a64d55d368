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
// no other claim has) until it returned, then exactly the CPUs it chose.
//
// It stays "being prepared" (PreparedOn's maybe) after it is recorded,
// until the claims file holds it and a last look found none of its new
// CPUs held by a container (finishPlacing): until then the Prepare may
// still fail (its memory, a config reload, the claims file, a running
// container adopted meanwhile), and a running grant container the plugin
// adopts meanwhile is not refused (it would be confined for good, for a
// claim that may never be) but makes the Prepare fail, and the kubelet
// retries it. Once the file holds the claim, it stays prepared (a CDI
// spec that cannot be written keeps the record: the retry keeps its CPUs).

// placing is what the Prepares of one kubelet call placed and have not
// finished, under mu. Prepares are serialized (prepareMu), so there is at
// most one call's.
type placing struct {
	// placed is what the claims' placements chose, by claim UID and
	// request name: recorded or not, the claims file does not hold it yet.
	placed map[string]*placedClaim
	// request is the request whose placement is under way ("": none,
	// else "namespace/name/request"), and maybe the CPUs it may choose.
	request string
	maybe   cpuset.CPUSet
}

// placedClaim is what placing holds of one claim.
type placedClaim struct {
	name     string // "namespace/name"
	requests map[string]cpuset.CPUSet
}

// startPlacing tells that the placement of request of claim uid
// (namespace/name), which may choose any of maybe, starts now.
func (d *Driver) startPlacing(uid, name, request string, maybe cpuset.CPUSet) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.placing == nil {
		d.placing = &placing{placed: map[string]*placedClaim{}}
	}
	pc := d.placing.placed[uid]
	if pc == nil {
		pc = &placedClaim{name: name, requests: map[string]cpuset.CPUSet{}}
		d.placing.placed[uid] = pc
	}
	d.placing.request, d.placing.maybe = name+"/"+request, maybe
}

// placed tells that the placement under way of request of claim uid
// returned cpus (empty when it failed).
func (d *Driver) placed(uid, request string, cpus cpuset.CPUSet) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.placing
	if p == nil {
		return
	}
	if pc := p.placed[uid]; pc != nil && !cpus.IsEmpty() {
		pc.requests[request] = cpus.Union(pc.requests[request])
	}
	p.request, p.maybe = "", cpuset.New()
}

// dropPlacingLocked forgets what placing holds of claim uid: its Prepare
// failed, and its record (if any) is back as it was, under mu.
func (d *Driver) dropPlacingLocked(uid string) {
	if d.placing == nil {
		return
	}
	delete(d.placing.placed, uid)
	d.placing.request, d.placing.maybe = "", cpuset.New()
	if len(d.placing.placed) == 0 {
		d.placing = nil
	}
}

func (d *Driver) dropPlacing(uid string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropPlacingLocked(uid)
}

// stopPlacingLocked forgets every claim being placed: the claims file
// holds them now, or the kubelet call ended (a failed one took its
// claims back under mu, with it, so that they are never seen by
// neither). Under mu.
func (d *Driver) stopPlacingLocked() { d.placing = nil }

func (d *Driver) stopPlacing() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopPlacingLocked()
}

// placedRequest is a request placed anew by the kubelet call, recorded
// and written, for finishPlacing's last look.
type placedRequest struct {
	uid, name, request, pool string
	cpus                     cpuset.CPUSet
}

// finishPlacing ends the "being prepared" of the claims the call placed
// and recorded (the claims file holds them now) and returns their
// requests placed anew. From here on PreparedOn answers them as
// prepared: a running grant container the plugin adopts from now on is
// refused for them; one adopted before holds its CPUs by now (it was
// adopted under the plugin's lock, which Held takes after this).
func (d *Driver) finishPlacing() []placedRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.placing
	d.stopPlacingLocked()
	if p == nil {
		return nil
	}
	var out []placedRequest
	for uid, pc := range p.placed {
		c := d.claims[uid]
		if c == nil {
			continue
		}
		for request, cpus := range pc.requests {
			// The record's: a claim the call prepared twice has only
			// its last placement.
			if r := c.Requests[request]; r != nil {
				if cpus := cpus.Intersection(r.CPUSet()); !cpus.IsEmpty() {
					out = append(out, placedRequest{uid: uid, name: pc.name, request: request, pool: r.Pool, cpus: cpus})
				}
			}
		}
	}
	return out
}

// nodeCPUs is every CPU of NUMA node numa, online or not: what a placement
// on that node may choose, also should a CPU come online while it runs.
func nodeCPUs(topo *sysfs.Topology, numa int) cpuset.CPUSet {
	return topo.AllCPUsWhere(func(c sysfs.CPU) bool { return c.NUMA == numa })
}
