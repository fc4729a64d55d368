package dra

// Prepare and Unprepare: the CPUs of each request of a claim, chosen
// within what the scheduler allocated by the placement rules, its memory
// reserved, recorded in the claims file and written into a CDI spec; and
// all of it given back at Unprepare.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// PrepareResourceClaims implements kubeletplugin.DRAPlugin: for each claim,
// the CPUs of each of its requests, chosen within what the scheduler
// allocated (this many slots of this pool on that NUMA node) by the
// placement rules, recorded in the claims file and written into a CDI spec.
// A claim prepared before with the same allocation keeps its CPUs and
// tokens; its spec is written again (after a reboot the kubelet prepares
// again, and the spec, in tmpfs, is gone).
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.prepareMu.Lock()
	defer d.prepareMu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	if !d.pools.Synced() {
		// Placed now, a claim could get the CPUs of a container that
		// runs on them: the daemon does not know it yet.
		for _, claim := range claims {
			out[claim.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, ErrNotSynced)}
		}
		d.log.Warnf("DRA: preparing %d claims: %v", len(claims), ErrNotSynced)
		return out, nil
	}
	d.forgetUnreported()
	// What the call places is "being prepared" until its last look (see
	// placing.go, takeback.go), which ends it; so does a failed call.
	defer d.stopPlacing()
	var done []*resourceapi.ResourceClaim
	var reports []prepareReport // of done, by index
	undo := map[string]*Claim{} // claim UID -> record before this call (nil: none)
	for _, claim := range claims {
		uid := string(claim.UID)
		before, report, err := d.prepare(claim)
		if err != nil {
			err = fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)
			// The kubelet retries, and logs it only at its own verbosity:
			// the node's operator reads why here.
			d.log.Warnf("DRA: preparing %v", err)
			out[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		if _, seen := undo[uid]; !seen {
			undo[uid] = before
		}
		done = append(done, claim)
		reports = append(reports, report)
	}
	if len(done) == 0 {
		return out, nil
	}
	if err := d.save(); err != nil {
		// The kubelet retries, each time failing the same way while the
		// state directory stays read-only: said once a minute (before,
		// nothing was said, and "prepared" was logged before the write).
		if log, unlogged := d.saveFailures.fail(err, time.Now()); log {
			more := ""
			if unlogged > 0 {
				more = fmt.Sprintf("; %d more Prepares failed so since the last such line", unlogged)
			}
			d.log.Warnf("DRA: preparing %d claims: %v (nothing is prepared, the kubelet retries%s)", len(done), err, more)
		}
		// Nobody knows these tokens yet: take the claims back (on their
		// CPUs from before only where no container was placed since).
		d.takeBack(undo)
		for _, claim := range done {
			out[claim.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)}
		}
		return out, nil
	}
	if failed := d.saveFailures.succeed(); failed > 0 {
		d.log.Infof("DRA: claims file written again after %d failed Prepares", failed)
	}
	if taken, released, settled := d.lastLook(undo); len(taken) > 0 {
		d.takenBackAfterSave(done, taken, released, settled, out)
		return out, nil
	}
	d.signal(d.changed)
	var answered []string // the claims the kubelet is told are prepared
	// Prepared only once the claims file holds them and their CDI specs
	// are written: said before the spec, a spec that could not be
	// written (a full /run, an SELinux denial on the CDI directory) read
	// "prepared" in the log while the kubelet got the error, which the
	// kubeletplugin package does not log.
	for i, claim := range done {
		res, fresh := d.result(claim)
		out[claim.UID] = res
		if res.Err != nil {
			d.cdiWriteFailed(claim, reports[i], res.Err)
			continue
		}
		d.cdiWritten(string(claim.UID))
		d.reported(claim, reports[i], fresh)
		answered = append(answered, string(claim.UID))
	}
	// A call the kubelet gave up on (its deadline passed, or it was
	// cancelled) gets no answer to it: the kubelet retries, and until
	// then the claims stay marked unanswered, so that a kill -9 before the
	// retry leaves them unconfirmed. A deadline passing after this look,
	// while the reply is on its way, is not seen here.
	if ctx.Err() == nil {
		d.answered(answered)
	}
	return out, nil
}

// ErrNotSynced refuses a Prepare before the runtime's first Synchronize
// (Pools.Synced): the kubelet retries it.
var ErrNotSynced = errors.New("the daemon has not synchronized with the container runtime yet, so it does not know which CPUs running containers hold; the kubelet retries")

// prepare decides one claim in memory and returns its record from before,
// and what to log once the claim is prepared (see prepareReport).
// A claim prepared before with the same allocation keeps each request whose
// CPUs still fit it (see fits), bound to its container while the claim is
// still reserved for that container's pod (see keepRequests); a request that no longer fits, and every
// request of a claim allocated anew, is placed anew with a new token.
func (d *Driver) prepare(claim *resourceapi.ResourceClaim) (*Claim, prepareReport, error) {
	uid := string(claim.UID)
	want, err := d.allocated(claim)
	if err != nil {
		return nil, prepareReport{}, err
	}
	pods := reservedPods(claim)
	// The pools as laid out now, not when the claim was remembered: the
	// daemon may have restarted with other pools or with CPUs offline.
	topo, layout := d.pools.Layout()
	held := d.heldForRemembered(uid, want)
	c := &Claim{Namespace: claim.Namespace, Name: claim.Name, Pods: pods, Requests: map[string]*Request{}}
	var kept, stale []string // remembered requests that fit, and that no longer do
	var heldStale []string   // of stale, those on CPUs a container holds
	var unbound []boundTo    // kept requests whose binding was of a pod gone from the claim
	d.mu.Lock()
	before := d.claims[uid]
	remembered := before != nil && sameAllocation(before, want)
	// Opaque config for this driver is refused for a claim placed anew.
	// One remembered with the same allocation was prepared by a release
	// that ignored the config: the allocation cannot change, so refusing
	// it now would leave its running pod without its CDI spec after a
	// reboot, for good. It is prepared again, with a warning said by the
	// report once the claims file holds it and its CDI spec is written:
	// logged here, it claimed a Prepare whose write then failed, at every
	// retry.
	var ignored string
	if err := refuseOpaqueConfig(claim.Status.Allocation.Devices.Config, want); err != nil {
		if !remembered {
			d.mu.Unlock()
			return nil, prepareReport{}, err
		}
		ignored = ignoredOpaqueConfig(claim.Status.Allocation.Devices.Config, want)
	}
	// warnIgnored says the claim was prepared again despite its config:
	// as before, or with the requests that no longer fit placed anew.
	var warnIgnored func()
	if ignored != "" {
		warnIgnored = func() {
			how := "as before"
			if len(stale) > 0 {
				how = "with " + requestNames(slices.Sorted(slices.Values(stale))) + " placed anew (no longer fitting its pool)"
			}
			d.log.Warnf("DRA: claim %s/%s (%s) prepared again %s, although %s", claim.Namespace, claim.Name, uid, how, ignored)
		}
	}
	if remembered {
		for name, r := range before.Requests {
			switch {
			case !fits(r, topo, layout):
				stale = append(stale, name)
			case heldByAnother(r, held):
				stale, heldStale = append(stale, name), append(heldStale, name)
			default:
				kept = append(kept, name)
			}
		}
		if len(stale) == 0 {
			// Each request keeps its mark: answered before, it
			// stays so; else it is still not until this call
			// answers (see answered).
			unbound = keepRequests(c, before, kept)
			d.setLocked(uid, c)
			d.gen++
			d.mu.Unlock()
			return before, prepareReport{changed: d.unbindMemory(claim, unbound), ignored: warnIgnored}, nil
		}
	}
	// What is placed anew is not in the way of its own new CPUs: a claim
	// deallocated and allocated again keeps its UID, and a stale request's
	// old CPUs are its own.
	exclude := d.claimed
	if before != nil {
		for name, r := range before.Requests {
			if !slices.Contains(kept, name) {
				exclude = exclude.Difference(r.CPUSet())
			}
		}
	}
	d.mu.Unlock()

	// Seen by PreparedOn from its placement on, as being prepared until
	// the call's last look (see placing.go); forgotten at once when this
	// Prepare fails.
	ok := false
	defer func() {
		if !ok {
			d.dropPlacing(uid)
		}
	}()
	// Marked so from the write before the last look: a kill -9 before
	// the call is answered leaves the mark (see answered), on these
	// requests only; a kept request keeps its own.
	prep := before.nextPrepare()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if slices.Contains(kept, name) {
			continue
		}
		w := want[name]
		r := &Request{Pool: w.pool, Slots: w.slots, Memory: w.memoryList(), Token: newToken(), Unanswered: true, Prepare: prep}
		got := cpuset.New()
		for _, numa := range slices.Sorted(maps.Keys(w.slots)) {
			n := w.slots[numa]
			d.startPlacing(uid, claim.Namespace+"/"+claim.Name, name, nodeCPUs(topo, numa).Difference(exclude))
			cpus, err := d.pools.Place(w.pool, numa, n, exclude)
			d.placed(uid, name, cpus)
			if err != nil {
				return nil, prepareReport{}, fmt.Errorf("request %s: %w (a container of an ending pod may still hold them; the kubelet retries)", name, err)
			}
			if cpus.Size() != n || !cpus.Intersection(exclude).IsEmpty() {
				return nil, prepareReport{}, fmt.Errorf("request %s: placement gave %q for %d CPUs on NUMA node %s", name, cpus.String(), n, nodeName(numa))
			}
			got, exclude = got.Union(cpus), exclude.Union(cpus)
		}
		r.CPUs, r.cpus = got.String(), &got
		c.Requests[name] = r
	}
	warnings, err := d.reserveNew(uid, before, c, kept)
	if err != nil {
		return nil, prepareReport{}, err
	}
	d.mu.Lock()
	// A kept request may have been bound while the lock was free: take
	// it as it is now (before is still the record; only Bind changes it).
	unbound = keepRequests(c, before, kept)
	d.setLocked(uid, c)
	// Still being prepared for PreparedOn, and so are the CPUs before
	// gives up (see placing.go).
	d.recordedLocked(uid, before, c)
	d.gen++
	d.mu.Unlock()
	unbinding := d.unbindMemory(claim, unbound)
	// The CPUs were placed under the plugin's lock and recorded under
	// the driver's: a config reload (or a CPU going offline) in between
	// did not see them among the claims (Pending) and could take them
	// out of their pool. Recorded now, any later reload sees them; one
	// that came in between shows in the layout read again.
	if err := d.placedStillFit(uid, before, c, kept); err != nil {
		return nil, prepareReport{}, err
	}
	if before != nil {
		// Requests of the claim's last allocation that reserve nothing
		// now give their memory back.
		var gone []string
		for name, r := range before.Requests {
			if len(r.Memory) > 0 && len(c.Requests[name].memoryOrNil()) == 0 {
				gone = append(gone, memoryKey(uid, name))
			}
		}
		if len(gone) > 0 {
			d.pools.ReleaseMemory(gone)
		}
	}
	placed := func() {
		if unbinding != nil {
			unbinding()
		}
		for _, w := range warnings {
			d.log.Warnf("DRA: claim %s/%s (%s) %s", claim.Namespace, claim.Name, uid, w)
		}
		switch {
		case len(stale) > 0:
			slices.Sort(stale)
			for _, name := range stale {
				old, r := before.Requests[name], c.Requests[name]
				if slices.Contains(heldStale, name) {
					d.log.Warnf("DRA: claim %s/%s (%s) request %s: CPUs %q are held by a running container, not one bound to the claim (the claims file holds a Prepare the kubelet may never have been answered, e.g. across a kill -9); placed anew on %q, with a new token",
						claim.Namespace, claim.Name, uid, name, old.CPUs, r.CPUs)
					continue
				}
				d.log.Warnf("DRA: claim %s/%s (%s) request %s: CPUs %q no longer fit its allocation in pool %s as now configured (%s, online CPUs only); placed anew on %q, with a new token",
					claim.Namespace, claim.Name, uid, name, old.CPUs, old.Pool, layout.Pool(old.Pool).String(), r.CPUs)
			}
		case before != nil:
			d.log.Infof("DRA: claim %s/%s (%s) was allocated again: CPUs %q replace %q", claim.Namespace, claim.Name, uid, c.cpus().String(), before.cpus().String())
		default:
			d.log.Infof("DRA: claim %s/%s (%s) prepared: CPUs %q", claim.Namespace, claim.Name, uid, c.cpus().String())
		}
	}
	ok = true
	return before, prepareReport{changed: placed, ignored: warnIgnored, placed: true}, nil
}

// heldForRemembered is, for a claim the driver remembers (else nil), the
// CPUs containers hold in the pools the scheduler allocated it, for
// heldByAnother.
func (d *Driver) heldForRemembered(uid string, want map[string]wanted) map[string]cpuset.CPUSet {
	d.mu.Lock()
	_, remembered := d.claims[uid]
	d.mu.Unlock()
	if !remembered {
		return nil
	}
	held := map[string]cpuset.CPUSet{}
	for _, w := range want {
		if _, ok := held[w.pool]; !ok {
			held[w.pool] = d.pools.Held(w.pool)
		}
	}
	return held
}

// heldByAnother tells whether a remembered request no container is bound
// to has CPUs a container holds: the claims file outlived the Prepare
// that wrote it (a kill -9 before its last look, see takeback.go), whose
// answer the kubelet never got, and a running container was adopted on
// them while it was being prepared. Kept, the claim would be prepared on
// that container's CPUs; its container, when it comes, binds it, and a
// bound request's CPUs are its container's.
func heldByAnother(r *Request, held map[string]cpuset.CPUSet) bool {
	return r.PodUID == "" && !held[r.Pool].Intersection(r.CPUSet()).IsEmpty()
}

// boundTo is a kept request whose binding keepRequests cleared, and the
// container it was bound to.
type boundTo struct{ request, podUID, container string }

// keepRequests puts the kept requests of the record before into c, as they
// are now, under d.mu. A kept request stays bound to its container only
// while the claim is still reserved for that container's pod (c.Pods): a
// resourceClaimName claim outlives its pods, and when the Unprepare after
// its last pod was lost (a kill -9 before the claims file was written),
// the restarted daemon still remembers the binding when the kubelet
// prepares the claim for its next pod, with the same allocation. Kept, it
// would refuse every container of the new pod ("already gives its CPUs to
// container ..."), for as long as the claim stays allocated. It returns
// the bindings it cleared.
func keepRequests(c, before *Claim, kept []string) []boundTo {
	var unbound []boundTo
	for _, name := range slices.Sorted(slices.Values(kept)) {
		r := before.Requests[name].clone()
		if r.PodUID != "" && !slices.Contains(c.Pods, r.PodUID) {
			unbound = append(unbound, boundTo{request: name, podUID: r.PodUID, container: r.Container})
			r.PodUID, r.Container = "", ""
		}
		c.Requests[name] = r
	}
	return unbound
}

// unbindMemory tells the pools that the requests keepRequests unbound are
// no longer their old containers': their memory reservations, which the
// restart counted bound to those containers, are whole again for the
// container of the new pod (see Pools.UnbindMemory). It returns what to
// log of it once the claim is prepared (nil: nothing): logged here, a
// claims write that then failed undid the unbinding and every kubelet
// retry logged it again.
func (d *Driver) unbindMemory(claim *resourceapi.ResourceClaim, unbound []boundTo) func() {
	for _, u := range unbound {
		d.pools.UnbindMemory(memoryKey(string(claim.UID), u.request), u.podUID, u.container)
	}
	if len(unbound) == 0 {
		return nil
	}
	return func() {
		for _, u := range unbound {
			d.log.Infof("DRA: claim %s/%s (%s) request %s: no longer bound to container %s of pod %s, which the claim is no longer reserved for",
				claim.Namespace, claim.Name, claim.UID, u.request, u.container, u.podUID)
		}
	}
}

// fits tells whether a remembered request's CPUs still stand for its
// allocation: all online CPUs of its pool as laid out now, as many on each
// NUMA node as the scheduler counted there. After a restart with other
// pools, or with CPUs offline, they may not; kept, they would make the
// container refused at creation (outside its pool as now configured) at
// every retry.
func fits(r *Request, topo *sysfs.Topology, layout *allocator.Layout) bool {
	cpus := r.CPUSet()
	if !cpus.IsSubsetOf(layout.Pool(r.Pool)) {
		return false
	}
	onNode := map[int]int{}
	online := 0
	for _, cpu := range topo.CPUs {
		if cpu.Online && cpus.Contains(cpu.ID) {
			onNode[cpu.NUMA]++
			online++
		}
	}
	return online == cpus.Size() && maps.Equal(onNode, r.Slots)
}

// memoryOrNil is the request's memory, nil for no request.
func (r *Request) memoryOrNil() []NodeMemory {
	if r == nil {
		return nil
	}
	return r.Memory
}

// reserveNew reserves the memory of the requests of c placed anew (not in
// kept), each checked against the nodes as they are now. When one does
// not fit, those reserved here are given back (or, for a request of the
// claim's record from before, reserved as they were) and the claim is not
// prepared: the kubelet retries. It returns the warnings of requests
// reserved beyond the memory the node has.
func (d *Driver) reserveNew(uid string, before, c *Claim, kept []string) ([]string, error) {
	var done, warnings []string
	for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
		r := c.Requests[name]
		if slices.Contains(kept, name) || len(r.Memory) == 0 {
			continue
		}
		warning, err := d.pools.ReserveMemory(r.reservation(uid, name), true)
		if err != nil {
			d.unreserveNew(uid, before, done)
			return nil, fmt.Errorf("request %s: %w (the kubelet retries)", name, err)
		}
		done = append(done, name)
		if warning != "" {
			warnings = append(warnings, "request "+name+": "+warning)
		}
	}
	return warnings, nil
}

// unreserveNew gives back what reserveNew reserved for these requests:
// a request of the claim's record from before reserves as it did, any
// other nothing.
func (d *Driver) unreserveNew(uid string, before *Claim, names []string) {
	for _, n := range names {
		if old := before.request(n); old != nil && len(old.Memory) > 0 {
			_, _ = d.pools.ReserveMemory(old.reservation(uid, n), false)
		} else {
			d.pools.ReleaseMemory([]string{memoryKey(uid, n)})
		}
	}
}

// placedStillFit checks the requests of c placed anew (not in kept),
// just recorded, against the pools as laid out now and the CPUs containers
// hold now. When one no longer fits, or a container took some of its
// CPUs, things changed after it was placed: the claim's record and
// memory are put back as they were before this Prepare (its kept requests
// bound as they were, or to a container that bound one meanwhile), or the claim is
// released when a container was placed on its CPUs from before meanwhile
// (see takeBack), and the Prepare fails; the kubelet retries it, and the
// retry places it in the pools as they are then.
func (d *Driver) placedStillFit(uid string, before, c *Claim, kept []string) error {
	topo, layout := d.pools.Layout()
	var misfit, taken []string
	for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
		if slices.Contains(kept, name) {
			continue
		}
		r := c.Requests[name]
		if !fits(r, topo, layout) {
			misfit = append(misfit, fmt.Sprintf("request %s: CPUs %q are not all online CPUs of pool %s as now configured (%s)", name, r.CPUs, r.Pool, layout.Pool(r.Pool).String()))
			continue
		}
		// A running container the plugin adopted meanwhile (a grant's,
		// which a claim being prepared never refuses: see the plugin's
		// claimOnGrant) may run on CPUs the placement chose.
		if held := d.pools.Held(r.Pool).Intersection(r.CPUSet()); !held.IsEmpty() {
			taken = append(taken, fmt.Sprintf("request %s: CPUs %q were taken by a running container while it was placed", name, held.String()))
		}
	}
	if len(misfit) == 0 && len(taken) == 0 {
		return nil
	}
	// Back as before this Prepare (its kept requests bound as they were,
	// or to a container that bound one meanwhile), where no container was
	// placed since.
	d.takeBack(map[string]*Claim{uid: before})
	if len(misfit) == 0 {
		return fmt.Errorf("%s; the kubelet retries", strings.Join(taken, "; "))
	}
	return fmt.Errorf("%s: the pools changed while it was placed (a config reload, or a CPU went offline); the kubelet retries", strings.Join(misfit, "; "))
}

// request is a claim's request by name, nil for none or no claim.
func (c *Claim) request(name string) *Request {
	if c == nil {
		return nil
	}
	return c.Requests[name]
}

// reserveAll reserves, as they are, the memory of a claim's requests (a
// claim remembered at a restart, or put back when a write failed).
func (d *Driver) reserveAll(uid string, c *Claim) {
	if c == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
		if r := c.Requests[name]; len(r.Memory) > 0 {
			if _, err := d.pools.ReserveMemory(r.reservation(uid, name), false); err != nil {
				d.log.Warnf("DRA: claim %s/%s (%s) request %s: reserving its memory: %v", c.Namespace, c.Name, uid, name, err)
			}
		}
	}
}

// releaseAll gives back the memory of a claim's requests.
func (d *Driver) releaseAll(uid string, c *Claim) {
	if c == nil {
		return
	}
	var keys []string
	for name, r := range c.Requests {
		if len(r.Memory) > 0 {
			keys = append(keys, memoryKey(uid, name))
		}
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		d.pools.ReleaseMemory(keys)
	}
}

// reservedPods returns the UIDs of the pods a claim is reserved for.
func reservedPods(claim *resourceapi.ResourceClaim) []string {
	var out []string
	for _, ref := range claim.Status.ReservedFor {
		if ref.APIGroup == "" && ref.Resource == "pods" {
			out = append(out, string(ref.UID))
		}
	}
	slices.Sort(out)
	return out
}

// result lists a prepared claim's devices for the kubelet, each with its
// request's CDI device; only the first device of a request carries it, so
// that a container gets each variable once. fresh says the spec file was
// not there before (see reported).
func (d *Driver) result(claim *resourceapi.ResourceClaim) (res kubeletplugin.PrepareResult, fresh bool) {
	uid := string(claim.UID)
	d.mu.Lock()
	c := d.claims[uid].clone()
	d.mu.Unlock()
	_, err := os.Lstat(cdiFile(d.cdiDir, uid))
	fresh = errors.Is(err, os.ErrNotExist)
	if err := writeCDISpec(d.cdiDir, uid, c); err != nil {
		return kubeletplugin.PrepareResult{Err: err}, false
	}
	given := map[string]bool{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		name := resourceclaim.BaseRequestRef(r.Request)
		dev := kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device, ShareID: r.ShareID}
		if !given[name] {
			dev.CDIDeviceIDs = []string{CDIDeviceID(uid, name)}
			given[name] = true
		}
		res.Devices = append(res.Devices, dev)
	}
	return res, fresh
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: the claims'
// CPUs are released and their CDI specs removed. A claim this driver does
// not know is fine (the kubelet may ask twice).
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.prepareMu.Lock()
	defer d.prepareMu.Unlock()
	return d.unprepareLocked(ctx, claims), nil
}

// unprepareLocked is UnprepareResourceClaims under prepareMu.
func (d *Driver) unprepareLocked(_ context.Context, claims []kubeletplugin.NamespacedObject) map[types.UID]error {
	out := make(map[types.UID]error, len(claims))
	var gone, pods []string
	released := map[string]*Claim{}
	d.mu.Lock()
	for _, ref := range claims {
		uid := string(ref.UID)
		out[ref.UID] = nil
		if c, ok := d.claims[uid]; ok {
			released[uid] = c
			d.log.Infof("DRA: claim %s/%s (%s) unprepared: CPUs %q released", c.Namespace, c.Name, uid, c.cpus().String())
			for _, r := range c.Requests {
				if r.PodUID != "" && !slices.Contains(pods, r.PodUID) {
					pods = append(pods, r.PodUID)
				}
			}
			d.setLocked(uid, nil)
			d.gen++
			gone = append(gone, uid)
		}
	}
	d.mu.Unlock()
	for uid, c := range released {
		d.releaseAll(uid, c)
	}
	if len(pods) > 0 {
		d.pools.Release(pods)
	}
	if len(gone) > 0 {
		if err := d.save(); err != nil {
			// Released in memory: the next write carries it. Until then a
			// restart would remember the claims, and the kubelet, which
			// asks again, or the check of stale claims forgets them.
			d.log.Warnf("DRA: %v", err)
			d.signal(d.dirty)
		}
		d.signal(d.changed)
	}
	for _, ref := range claims {
		if err := removeCDISpec(d.cdiDir, string(ref.UID)); err != nil {
			out[ref.UID] = err
		}
	}
	return out
}
