package dra

import (
	"maps"
	"slices"

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
// until the kubelet call ends: until then the Prepare may still fail (its
// memory, a config reload, the claims file, a running container adopted
// meanwhile on its new CPUs), and a running grant container the plugin
// adopts meanwhile is not refused (it would be confined for good, for a
// claim that may never be) but makes the Prepare fail (the last look,
// see takeback.go), and the kubelet retries it. So do the CPUs of the
// claim's record from before the call that its new record no longer has:
// a Prepare that fails puts that record back, and it must not be put back
// on CPUs a container was placed on meanwhile; a container showing a
// grant is refused them for a moment, a running one adopted there makes
// the take-back release the claim instead (its CPUs held, checked with the
// last look). Those of its old requests that were bound to a container
// stay prepared until the call ends: their container holds them.

// placing is what the Prepares of one kubelet call placed and what their
// records from before gave up, not final yet, under mu. Prepares are
// serialized (prepareMu), so there is at most one call's.
type placing struct {
	// claims are the call's claims placed anew (some of their requests),
	// by UID.
	claims map[string]*placingClaim
	// request is the request whose placement is under way ("": none,
	// else "namespace/name/request"), and maybe the CPUs it may choose.
	request string
	maybe   cpuset.CPUSet
}

// placingClaim is what placing holds of one claim, by request name.
type placingClaim struct {
	name string // "namespace/name"
	// placed is what the call's placements chose, recorded or not.
	placed map[string]cpuset.CPUSet
	// old are the CPUs of the requests of the claim's record from before
	// the call that its new record does not keep and that no container
	// was bound to: being prepared (a take-back may put them back).
	old map[string]cpuset.CPUSet
	// oldBound are those a container was bound to: prepared.
	oldBound map[string]cpuset.CPUSet
}

// startPlacing tells that the placement of request of claim uid
// (namespace/name), which may choose any of maybe, starts now.
func (d *Driver) startPlacing(uid, name, request string, maybe cpuset.CPUSet) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.placingClaimLocked(uid, name)
	d.placing.request, d.placing.maybe = name+"/"+request, maybe
}

// placingClaimLocked is the note's entry of claim uid, made if missing.
func (d *Driver) placingClaimLocked(uid, name string) *placingClaim {
	if d.placing == nil {
		d.placing = &placing{claims: map[string]*placingClaim{}}
	}
	pc := d.placing.claims[uid]
	if pc == nil {
		pc = &placingClaim{name: name, placed: map[string]cpuset.CPUSet{}, old: map[string]cpuset.CPUSet{}, oldBound: map[string]cpuset.CPUSet{}}
		d.placing.claims[uid] = pc
	}
	return pc
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
	if pc := p.claims[uid]; pc != nil && !cpus.IsEmpty() {
		pc.placed[request] = cpus.Union(pc.placed[request])
	}
	p.request, p.maybe = "", cpuset.New()
}

// recordedLocked notes, as claim uid's new record c replaces before (under
// mu, with it), the CPUs of before's requests that c does not keep (a
// kept request keeps its token).
func (d *Driver) recordedLocked(uid string, before, c *Claim) {
	if before == nil {
		return
	}
	pc := d.placingClaimLocked(uid, c.Namespace+"/"+c.Name)
	for name, r := range before.Requests {
		if now := c.Requests[name]; now != nil && now.Token == r.Token {
			continue
		}
		into := pc.old
		if r.PodUID != "" {
			into = pc.oldBound
		}
		into[name] = into[name].Union(r.CPUSet())
	}
}

// dropPlacingLocked forgets what placing holds of claim uid: its record
// is final, or back as it was (or released), under mu with that change.
func (d *Driver) dropPlacingLocked(uid string) {
	if d.placing == nil {
		return
	}
	delete(d.placing.claims, uid)
	d.placing.request, d.placing.maybe = "", cpuset.New()
	if len(d.placing.claims) == 0 {
		d.placing = nil
	}
}

func (d *Driver) dropPlacing(uid string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropPlacingLocked(uid)
}

// stopPlacingLocked forgets every claim of the call: their records are
// final (the last look found them clean, or took them back under mu with
// it, so that they are never seen by neither). Under mu.
func (d *Driver) stopPlacingLocked() { d.placing = nil }

func (d *Driver) stopPlacing() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopPlacingLocked()
}

// beingPrepared tells whether the record of request name of claim uid,
// on cpus, is what the call placed and has not finished yet (p nil: none
// is). Not yet recorded, the record is the claim's from before, whose
// CPUs stay prepared until the new one replaces it.
func (p *placing) beingPrepared(uid, name string, cpus cpuset.CPUSet) bool {
	if p == nil {
		return false
	}
	pc := p.claims[uid]
	if pc == nil {
		return false
	}
	placed, ok := pc.placed[name]
	return ok && cpus.IsSubsetOf(placed)
}

// sortedUIDs are the note's claims in order.
func (p *placing) sortedUIDs() []string { return slices.Sorted(maps.Keys(p.claims)) }

// nodeCPUs is every CPU of NUMA node numa, online or not: what a placement
// on that node may choose, also should a CPU come online while it runs.
func nodeCPUs(topo *sysfs.Topology, numa int) cpuset.CPUSet {
	return topo.AllCPUsWhere(func(c sysfs.CPU) bool { return c.NUMA == numa })
}
