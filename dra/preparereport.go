package dra

import resourceapi "k8s.io/api/resource/v1"

// prepareReport is what a Prepare logs of a claim once the claim is
// prepared: the claims file holds it and its CDI spec is written. Logged
// while deciding, it claimed a Prepare whose write then failed, at every
// kubelet retry.
type prepareReport struct {
	// changed says what this Prepare changed in the claim's record: the
	// CPUs it placed, the memory it reserved beyond the node's, the
	// bindings of pods the claim is no longer reserved for it dropped.
	// Nil for nothing. When only the CDI spec fails, the record stays (the retry
	// keeps its CPUs and tokens) and the retry changes nothing, so it is
	// kept until a Prepare of the claim writes the spec (unreported).
	changed func()
	// ignored warns of the opaque config the claim is prepared again
	// without; each Prepare of the claim finds it again. Nil for none.
	ignored func()
	// placed says changed tells where the claim's CPUs are (placed,
	// placed anew, allocated again), not only bindings it dropped.
	placed bool
}

// reported logs a prepared claim's report, after what its earlier
// Prepares, whose CDI specs could not be written, changed. fresh says
// this Prepare wrote a spec file that was not there: when nothing
// reported says where the claim's CPUs are, the claim is said prepared
// all the same. Kept in memory only, the report of a Prepare whose spec
// could not be written is lost at a daemon restart, and the retry that
// wrote the spec said nothing; after a reboot that emptied /run, neither
// did the Prepare that wrote every remembered claim's spec again. Under
// prepareMu.
func (d *Driver) reported(claim *resourceapi.ResourceClaim, r prepareReport, fresh bool) {
	uid := string(claim.UID)
	said := r.placed
	for _, earlier := range d.unreported[uid] {
		earlier.changed()
		said = said || earlier.placed
	}
	delete(d.unreported, uid)
	if r.ignored != nil {
		r.ignored()
	}
	if r.changed != nil {
		r.changed()
	}
	if fresh && !said {
		d.mu.Lock()
		cpus := d.claims[uid].cpus().String()
		d.mu.Unlock()
		d.log.Infof("DRA: claim %s/%s (%s) prepared: CPUs %q", claim.Namespace, claim.Name, uid, cpus)
	}
}

// unreport keeps what a Prepare changed in a claim's record that stays
// while the claim is not prepared (its CDI spec could not be written),
// for the Prepare that writes the spec. Under prepareMu.
func (d *Driver) unreport(claim *resourceapi.ResourceClaim, r prepareReport) {
	if r.changed == nil {
		return
	}
	if d.unreported == nil {
		d.unreported = map[string][]prepareReport{}
	}
	uid := string(claim.UID)
	d.unreported[uid] = append(d.unreported[uid], prepareReport{changed: r.changed, placed: r.placed})
}

// forgetUnreported drops what was kept for claims no longer remembered
// (unprepared, or forgotten as stale): said later, it would describe CPUs
// the claim no longer has. Under prepareMu.
func (d *Driver) forgetUnreported() {
	if len(d.unreported) == 0 && len(d.cdiFailing) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.forgetCDIFailingLocked()
	for uid := range d.unreported {
		if _, ok := d.claims[uid]; !ok {
			delete(d.unreported, uid)
		}
	}
}
