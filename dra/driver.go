package dra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Driver is the DRA driver: it prepares and unprepares claims for the
// kubelet (kubeletplugin.DRAPlugin), tells the NRI plugin which claims a
// container shows (Bind), and computes the ResourceSlices.
//
// Locks: prepareMu serializes Prepare and Unprepare (they place and
// release) and is held while they call into Pools; mu guards the claims
// and is never held while calling out, so the plugin may call Bind under
// its own lock while a Prepare waits for that lock.
type Driver struct {
	pools    Pools
	nodeName string
	model    string
	cdiDir   string
	log      *logrus.Logger
	store    *store

	prepareMu sync.Mutex

	mu      sync.Mutex
	claims  map[string]*Claim // by claim UID
	byToken map[string]tokenRef
	// claimed is every claim's CPUs (claims never share one).
	claimed cpuset.CPUSet
	// enc holds each claim's JSON for the file, made when it changes.
	enc map[string][]byte
	// gen counts the changes to claims, to order the copies that reach
	// the file.
	gen uint64
	// dirty wakes keepWritten (a binding to write), changed wakes Run
	// (slices to publish).
	dirty   chan struct{}
	changed chan struct{}
	// retry paces the writes that failed and the attempts to serve the
	// kubelet.
	retry retry

	// statusMu guards status, which Serve sets and metrics read.
	statusMu   sync.Mutex
	status     Status
	statusFile string
}

// tokenRef locates a token's request.
type tokenRef struct{ claim, request string }

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// Options configure a Driver.
type Options struct {
	// NodeName is the Node this driver serves; its ResourceSlice pool
	// has that name, and allocations from other pools are refused.
	NodeName string
	// Model is the device model, ModelNUMANode (the default) or ModelCPU.
	Model string
	// ClaimsFile keeps the prepared claims (see ClaimsFile).
	ClaimsFile string
	// CDIDir is where the runtime reads CDI specs (/var/run/cdi).
	CDIDir string
	// StatusFile receives the driver's state at each change (see
	// StatusFile); empty: none.
	StatusFile string
	Log        *logrus.Logger
}

// New returns a driver with the claims its file remembers.
func New(p Pools, o Options) (*Driver, error) {
	if o.NodeName == "" {
		return nil, errors.New("DRA driver: no node name; set dra.nodeName or the NODE_NAME environment variable")
	}
	if o.Log == nil {
		o.Log = logrus.New()
	}
	switch o.Model {
	case "":
		o.Model = ModelNUMANode
	case ModelNUMANode, ModelCPU:
	default:
		return nil, fmt.Errorf("DRA driver: unknown device model %q; use %s", o.Model, strings.Join(Models(), " or "))
	}
	d := &Driver{pools: p, nodeName: o.NodeName, model: o.Model, cdiDir: o.CDIDir, log: o.Log, store: newStore(o.ClaimsFile), retry: defaultRetry,
		byToken: map[string]tokenRef{}, claimed: cpuset.New(), enc: map[string][]byte{}, dirty: make(chan struct{}, 1), changed: make(chan struct{}, 1)}
	claims, warning, err := d.store.load()
	if err != nil {
		return nil, err
	}
	if warning != "" {
		d.log.Warn(warning)
	}
	d.claims = map[string]*Claim{}
	for uid, c := range claims {
		d.setLocked(uid, c)
		// Prepared before the restart: the memory is the claim's, as the
		// scheduler still counts it.
		d.reserveAll(uid, c)
	}
	d.statusFile = o.StatusFile
	d.setState(StateStarting, "")
	// Said once, at start, in the log the node's operator reads: a claim
	// the API's limit keeps Pending never reaches this driver.
	topo, layout := p.Layout()
	if w := ClaimLimit(d.model, Offer(topo, layout, nil)); w != "" {
		d.log.Warnf("DRA: dra.devices: %s", w)
	}
	return d, nil
}

// wanted is what the scheduler allocated to one request of a claim.
type wanted struct {
	pool  string
	slots map[int]int
	// memory is the memory and hugepages it consumed, by node; nil when
	// none.
	memory map[int]*NodeMemory
}

// memoryList is w.memory in node order.
func (w wanted) memoryList() []NodeMemory {
	var out []NodeMemory
	for _, n := range slices.Sorted(maps.Keys(w.memory)) {
		out = append(out, *w.memory[n])
	}
	return out
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin: for each claim,
// the CPUs of each of its requests, chosen within what the scheduler
// allocated (this many slots of this pool on that NUMA node) by the
// placement rules, recorded in the claims file and written into a CDI spec.
// A claim prepared before with the same allocation keeps its CPUs and
// tokens; its spec is written again (after a reboot the kubelet prepares
// again, and the spec, in tmpfs, is gone).
func (d *Driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.prepareMu.Lock()
	defer d.prepareMu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	var done []*resourceapi.ResourceClaim
	undo := map[string]*Claim{} // claim UID -> record before this call (nil: none)
	for _, claim := range claims {
		uid := string(claim.UID)
		before, err := d.prepare(claim)
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
	}
	if len(done) == 0 {
		return out, nil
	}
	if err := d.save(); err != nil {
		// Nobody knows these tokens yet: take the claims back.
		d.mu.Lock()
		now := map[string]*Claim{}
		for uid, before := range undo {
			if c, ok := d.claims[uid]; ok {
				now[uid] = c.clone()
			}
			d.setLocked(uid, before)
		}
		d.gen++
		d.mu.Unlock()
		for uid, before := range undo {
			d.releaseAll(uid, now[uid])
			d.reserveAll(uid, before)
		}
		for _, claim := range done {
			out[claim.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)}
		}
		return out, nil
	}
	d.signal(d.changed)
	for _, claim := range done {
		out[claim.UID] = d.result(claim)
	}
	return out, nil
}

// prepare decides one claim in memory and returns its record from before.
// A claim prepared before with the same allocation keeps each request whose
// CPUs still fit it (see fits); a request that no longer fits, and every
// request of a claim allocated anew, is placed anew with a new token.
func (d *Driver) prepare(claim *resourceapi.ResourceClaim) (*Claim, error) {
	uid := string(claim.UID)
	want, err := d.allocated(claim)
	if err != nil {
		return nil, err
	}
	pods := reservedPods(claim)
	// The pools as laid out now, not when the claim was remembered: the
	// daemon may have restarted with other pools or with CPUs offline.
	topo, layout := d.pools.Layout()
	c := &Claim{Namespace: claim.Namespace, Name: claim.Name, Pods: pods, Requests: map[string]*Request{}}
	var kept, stale []string // remembered requests that fit, and that no longer do
	d.mu.Lock()
	before := d.claims[uid]
	if before != nil && sameAllocation(before, want) {
		for name, r := range before.Requests {
			if fits(r, topo, layout) {
				c.Requests[name] = r.clone()
				kept = append(kept, name)
			} else {
				stale = append(stale, name)
			}
		}
		if len(stale) == 0 {
			d.setLocked(uid, c)
			d.gen++
			d.mu.Unlock()
			return before, nil
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

	for _, name := range slices.Sorted(maps.Keys(want)) {
		if slices.Contains(kept, name) {
			continue
		}
		w := want[name]
		r := &Request{Pool: w.pool, Slots: w.slots, Memory: w.memoryList(), Token: newToken()}
		got := cpuset.New()
		for _, numa := range slices.Sorted(maps.Keys(w.slots)) {
			n := w.slots[numa]
			cpus, err := d.pools.Place(w.pool, numa, n, exclude)
			if err != nil {
				return nil, fmt.Errorf("request %s: %w (a container of an ending pod may still hold them; the kubelet retries)", name, err)
			}
			if cpus.Size() != n || !cpus.Intersection(exclude).IsEmpty() {
				return nil, fmt.Errorf("request %s: placement gave %q for %d CPUs on NUMA node %s", name, cpus.String(), n, nodeName(numa))
			}
			got, exclude = got.Union(cpus), exclude.Union(cpus)
		}
		r.CPUs, r.cpus = got.String(), &got
		c.Requests[name] = r
	}
	warnings, err := d.reserveNew(uid, before, c, kept)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	// A kept request may have been bound while the lock was free: take
	// it as it is now (before is still the record; only Bind changes it).
	for _, name := range kept {
		c.Requests[name] = before.Requests[name].clone()
	}
	d.setLocked(uid, c)
	d.gen++
	d.mu.Unlock()
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
	for _, w := range warnings {
		d.log.Warnf("DRA: claim %s/%s (%s) %s", claim.Namespace, claim.Name, uid, w)
	}
	switch {
	case len(stale) > 0:
		slices.Sort(stale)
		for _, name := range stale {
			old, r := before.Requests[name], c.Requests[name]
			d.log.Warnf("DRA: claim %s/%s (%s) request %s: CPUs %q no longer fit its allocation in pool %s as now configured (%s, online CPUs only); placed anew on %q, with a new token",
				claim.Namespace, claim.Name, uid, name, old.CPUs, old.Pool, layout.Pool(old.Pool).String(), r.CPUs)
		}
	case before != nil:
		d.log.Infof("DRA: claim %s/%s (%s) was allocated again: CPUs %q replace %q", claim.Namespace, claim.Name, uid, c.cpus().String(), before.cpus().String())
	default:
		d.log.Infof("DRA: claim %s/%s (%s) prepared: CPUs %q", claim.Namespace, claim.Name, uid, c.cpus().String())
	}
	return before, nil
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

// allocated reads what the scheduler allocated from this driver, by
// request: one pool each, slots by NUMA node.
func (d *Driver) allocated(claim *resourceapi.ResourceClaim) (map[string]wanted, error) {
	if claim.Status.Allocation == nil {
		return nil, errors.New("not allocated")
	}
	// The API server refuses a status with more results, so none should
	// come here; one that did would be a claim the scheduler cannot have
	// counted, and its CPUs are not given.
	if n := len(claim.Status.Allocation.Devices.Results); n > MaxResultsPerClaim {
		return nil, fmt.Errorf("the allocation has %d results, more than the API's %d per claim (AllocationResultsMaxSize); in dra.devices: %s a CPU is one result, so a claim of more than %d CPUs needs dra.devices: %s", n, MaxResultsPerClaim, ModelCPU, MaxResultsPerClaim, ModelNUMANode)
	}
	want := map[string]wanted{}
	for _, res := range claim.Status.Allocation.Devices.Results {
		if res.Driver != DriverName {
			continue
		}
		if res.Pool != d.nodeName {
			return nil, fmt.Errorf("device %s is from pool %q, not this node's (%s)", res.Device, res.Pool, d.nodeName)
		}
		if res.AdminAccess != nil && *res.AdminAccess {
			return nil, fmt.Errorf("request %s asks for admin access, which %s does not give: its CPUs belong to one container", res.Request, DriverName)
		}
		pool, numa, slot, err := ParseDeviceName(res.Device)
		if err != nil {
			return nil, err
		}
		n := 1
		var mem NodeMemory
		if !slot {
			if n, err = consumedCPUs(res); err != nil {
				return nil, err
			}
			if mem, err = consumedMemory(res, numa); err != nil {
				return nil, err
			}
		}
		name := resourceclaim.BaseRequestRef(res.Request)
		w, ok := want[name]
		if !ok {
			w = wanted{pool: pool, slots: map[int]int{}}
		}
		if w.pool != pool {
			return nil, fmt.Errorf("request %s was given devices of pools %s and %s; a request's CPUs come from one pool (use a DeviceClass of one pool, e.g. cpupool-%s)", name, w.pool, pool, pools.Exclusive)
		}
		w.slots[numa] += n
		if mem.Memory > 0 || len(mem.HugePages) > 0 {
			if w.memory == nil {
				w.memory = map[int]*NodeMemory{}
			}
			if have := w.memory[numa]; have != nil {
				have.Memory += mem.Memory
				if have.HugePages == nil && len(mem.HugePages) > 0 {
					have.HugePages = map[int64]int64{}
				}
				for size, pages := range mem.HugePages {
					have.HugePages[size] += pages
				}
			} else {
				w.memory[numa] = &mem
			}
		}
		want[name] = w
	}
	return want, nil
}

// consumedCPUs is the number of CPUs a share of a ModelNUMANode device
// stands for: the capacity the scheduler counted.
func consumedCPUs(res resourceapi.DeviceRequestAllocationResult) (int, error) {
	q, ok := res.ConsumedCapacity[CapacityCPUs]
	if !ok {
		return 0, fmt.Errorf("device %s was allocated without consumed capacity %s; the scheduler needs the DRAConsumableCapacity feature (beta, on by default since 1.36) for dra.devices: %s, or use dra.devices: %s", res.Device, CapacityCPUs, ModelNUMANode, ModelCPU)
	}
	n, ok := q.AsInt64()
	if !ok || n < 1 || n > maxCPUs {
		return 0, fmt.Errorf("device %s was allocated %s CPUs; a request takes a whole number of CPUs", res.Device, q.String())
	}
	return int(n), nil
}

// maxCPUs bounds a count from the API server.
const maxCPUs = 1 << 16

// maxBytes bounds an amount of memory from the API server or the claims
// file: 1 PiB, beyond any node, and nothing overflows below it.
const maxBytes = int64(1) << 50

// consumedMemory is the memory and hugepages a share of a ModelNUMANode
// device stands for: the capacities cpupool.dev/memory and
// cpupool.dev/hugepages<size> the scheduler counted, on the device's node.
// Hugepages are whole pages (the device's request policy rounds a request
// up to the page size).
func consumedMemory(res resourceapi.DeviceRequestAllocationResult, numa int) (NodeMemory, error) {
	nm := NodeMemory{Node: numa}
	for _, name := range slices.Sorted(maps.Keys(res.ConsumedCapacity)) {
		q := res.ConsumedCapacity[name]
		sizeKB, isPages := hugePagesCapacitySize(name)
		if name != CapacityMemory && !isPages {
			continue
		}
		b, ok := q.AsInt64()
		if !ok || b < 0 || b > maxBytes {
			return NodeMemory{}, fmt.Errorf("device %s was allocated %s of %s; that is no amount of memory", res.Device, q.String(), name)
		}
		if b == 0 {
			continue
		}
		if numa == sysfs.Unknown {
			return NodeMemory{}, fmt.Errorf("device %s was allocated %s of %s, on no NUMA node", res.Device, q.String(), name)
		}
		if !isPages {
			nm.Memory = b
			continue
		}
		size := sizeKB * 1024
		if nm.HugePages == nil {
			nm.HugePages = map[int64]int64{}
		}
		nm.HugePages[sizeKB] = (b + size - 1) / size
	}
	return nm, nil
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
			for _, n := range done {
				if old := before.request(n); old != nil && len(old.Memory) > 0 {
					_, _ = d.pools.ReserveMemory(old.reservation(uid, n), false)
				} else {
					d.pools.ReleaseMemory([]string{memoryKey(uid, n)})
				}
			}
			return nil, fmt.Errorf("request %s: %w (the kubelet retries)", name, err)
		}
		done = append(done, name)
		if warning != "" {
			warnings = append(warnings, "request "+name+": "+warning)
		}
	}
	return warnings, nil
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

// sameAllocation tells whether a prepared claim was prepared for want.
func sameAllocation(c *Claim, want map[string]wanted) bool {
	if len(c.Requests) != len(want) {
		return false
	}
	for name, w := range want {
		r, ok := c.Requests[name]
		if !ok || r.Pool != w.pool || !reflect.DeepEqual(r.Slots, w.slots) || !sameMemory(r.Memory, w.memoryList()) {
			return false
		}
	}
	return true
}

// sameMemory tells whether two requests' memory is the same.
func sameMemory(a, b []NodeMemory) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Node != b[i].Node || a[i].Memory != b[i].Memory || !maps.Equal(a[i].HugePages, b[i].HugePages) {
			return false
		}
	}
	return true
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
// that a container gets each variable once.
func (d *Driver) result(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	uid := string(claim.UID)
	d.mu.Lock()
	c := d.claims[uid].clone()
	d.mu.Unlock()
	if err := writeCDISpec(d.cdiDir, uid, c); err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	var res kubeletplugin.PrepareResult
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
	return res
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: the claims'
// CPUs are released and their CDI specs removed. A claim this driver does
// not know is fine (the kubelet may ask twice).
func (d *Driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.prepareMu.Lock()
	defer d.prepareMu.Unlock()
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
	return out, nil
}

// HandleError implements kubeletplugin.DRAPlugin: errors of the background
// work (publishing slices, the gRPC servers) are logged; publishing
// retries by itself.
func (d *Driver) HandleError(_ context.Context, err error, msg string) {
	if errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.log.Warnf("DRA: %s: %v", msg, err)
		return
	}
	d.log.Errorf("DRA: %s: %v", msg, err)
}

// setLocked replaces (c nil: removes) a claim and its tokens.
func (d *Driver) setLocked(uid string, c *Claim) {
	if old, ok := d.claims[uid]; ok {
		for _, r := range old.Requests {
			delete(d.byToken, r.Token)
		}
		d.claimed = d.claimed.Difference(old.cpus())
	}
	if c == nil {
		delete(d.claims, uid)
		delete(d.enc, uid)
		return
	}
	d.claims[uid] = c
	for name, r := range c.Requests {
		d.byToken[r.Token] = tokenRef{uid, name}
	}
	d.claimed = d.claimed.Union(c.cpus())
	d.encodeLocked(uid)
}

// encodeLocked makes a claim's JSON for the file.
func (d *Driver) encodeLocked(uid string) {
	data, err := json.Marshal(d.claims[uid])
	if err != nil {
		panic(fmt.Sprintf("encoding claim %s: %v", uid, err)) // plain strings, ints and maps
	}
	d.enc[uid] = data
}

// save writes the claims as they are now.
func (d *Driver) save() error {
	d.mu.Lock()
	gen, data := d.gen, encodeClaims(d.enc)
	d.mu.Unlock()
	return d.store.save(gen, data)
}

func (d *Driver) snapshotLocked() map[string]*Claim {
	out := make(map[string]*Claim, len(d.claims))
	for uid, c := range d.claims {
		out[uid] = c.clone()
	}
	return out
}

// signal wakes Run without blocking: one pending signal covers any number
// of changes.
func (d *Driver) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Claims returns a copy of the prepared claims, by UID.
func (d *Driver) Claims() map[string]*Claim {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snapshotLocked()
}

// Resources computes the ResourceSlices of the node as it is now.
func (d *Driver) Resources() resourceslice.DriverResources {
	return Resources(d.nodeName, d.model, d.Offer())
}

// Offer computes the node's slots: the pools, less the CPUs containers
// hold outside any prepared claim.
func (d *Driver) Offer() []Group {
	topo, layout := d.pools.Layout()
	held := map[string]cpuset.CPUSet{}
	for _, pool := range []string{pools.Exclusive, pools.ExclusiveNonIsolcpus} {
		held[pool] = d.pools.Held(pool)
	}
	d.mu.Lock()
	claimed := cpuset.New()
	for _, c := range d.claims {
		claimed = claimed.Union(c.cpus())
	}
	memoryHeld := d.memoryHeldLocked()
	d.mu.Unlock()
	for pool, cpus := range held {
		held[pool] = cpus.Difference(claimed)
	}
	return WithMemoryHeld(Offer(topo, layout, held), d.pools.MemoryOffer(), memoryHeld)
}

// memoryHeldLocked names, by NUMA node, the pool of the device the prepared
// claims that hold some of the node's memory were allocated it on: the
// node's memory stays on that device while they do (WithMemoryHeld). Were
// claims of both pools to hold some (a file from another layout), the
// first pool in pool order keeps it, as the layout's rule would.
func (d *Driver) memoryHeldLocked() map[int]string {
	var out map[int]string
	for _, c := range d.claims {
		for _, r := range c.Requests {
			for _, nm := range r.Memory {
				if cur, ok := out[nm.Node]; ok && (cur == pools.Exclusive || cur == r.Pool) {
					continue
				}
				if out == nil {
					out = map[int]string{}
				}
				out[nm.Node] = r.Pool
			}
		}
	}
	return out
}

// Run publishes the slices whenever the pools or the claims change, until
// ctx ends. Serve writes the bindings (keepWritten).
func (d *Driver) Run(ctx context.Context, publish func(resourceslice.DriverResources) error) {
	var last []Group
	republish := func() {
		groups := d.Offer()
		if last != nil && reflect.DeepEqual(groups, last) {
			return
		}
		if err := publish(Resources(d.nodeName, d.model, groups)); err != nil {
			d.log.Errorf("DRA: publishing ResourceSlices: %v", err)
			return
		}
		last = groups
	}
	republish()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.pools.Changed():
			republish()
		case <-d.changed:
			republish()
		}
	}
}
