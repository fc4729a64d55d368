package allocator

// The memory DRA claims reserve (docs/dra.md, "Memory and hugepages"): the
// scheduler allocated a claim's memory and hugepages on a NUMA node, and
// from Prepare to Unprepare they are the claim's. Each request's
// reservation is a holder of the node's memory of its own ("claim:" and
// its key), so that no other container takes them. The container bound to
// the request takes its memory from the reservation first: the holder
// counts only what that container does not hold itself, so the two are
// never counted twice, and when the container ends the reservation is
// whole again for its next run.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// ClaimMemory is what one request of a prepared claim reserves.
type ClaimMemory struct {
	// Key names the request: "<claim uid>/<request>".
	Key string
	// PodUID and Container name the container bound to the request, once
	// one showed its token; empty before.
	PodUID, Container string
	// Held is the memory and hugepages the scheduler allocated, by node.
	Held []NodeMemory
}

// claimHolder prefixes a reservation's holder id; container ids are hex.
const claimHolder = "claim:"

// claimBook is the reservations and who is bound to them.
type claimBook struct {
	claims map[string]*ClaimMemory
	// byOwner lists the keys bound to a container ("<pod uid>/<name>",
	// as restartKey), sorted.
	byOwner map[string][]string
	// ownerOf remembers the owner of each holder id bound to a claim: a
	// container's memory is given back after it left a.containers.
	ownerOf map[string]string
}

func ownerKey(podUID, container string) string { return podUID + "/" + container }

// ReserveClaim reserves a claim request's memory, replacing what the key
// reserved before. With check, the reservation must fit the nodes now
// (now: the hugepage counts read for it; nil, those last read): hugepages
// taken by something the plugin does not know, or by a container created
// since the scheduler counted, refuse it with what each node has, and the
// key keeps what it reserved before. Memory beyond what the node has is
// reserved anyway, with a warning: a memory limit is a ceiling, not a
// reservation, and the scheduler counted it.
func (a *Allocator) ReserveClaim(c ClaimMemory, now map[int][]sysfs.HugePages, check bool) (warning string, err error) {
	b := &a.claims
	if b.claims == nil {
		b.claims, b.byOwner, b.ownerOf = map[string]*ClaimMemory{}, map[string][]string{}, map[string]string{}
	}
	old, had := b.claims[c.Key]
	b.drop(c.Key)
	a.setMemory(claimHolder+c.Key, nil) // its own reservation is nobody else's
	if check {
		warning, err = a.claimFits(c, now)
		if err != nil {
			if had {
				a.addClaim(old)
			}
			return "", err
		}
	}
	c.Held = slices.Clone(c.Held)
	a.addClaim(&c)
	if had && old.PodUID != "" && (old.PodUID != c.PodUID || old.Container != c.Container) {
		// Its container's other claims take what this one no longer does.
		a.refreshOwner(ownerKey(old.PodUID, old.Container))
	}
	return warning, nil
}

// claimFits tells whether the nodes hold a reservation now.
func (a *Allocator) claimFits(c ClaimMemory, now map[int][]sysfs.HugePages) (string, error) {
	fit := a.fitFor(new(memFit), Request{Demand: DemandOf(c.Held)}, now, false)
	var short, warnings []string
	for _, nm := range c.Held {
		// The fit of this node's part alone, in memFit's form, so that
		// the message is the allocator's.
		part := &memFit{demand: Demand{Memory: nm.Memory, HugePages: nm.HugePages}, memory: fit.memory}
		for _, p := range nm.HugePages {
			i := slices.IndexFunc(fit.demand.HugePages, func(q Pages) bool { return q.SizeKB == p.SizeKB })
			part.pages = append(part.pages, fit.pages[i])
		}
		nodes := []int{nm.Node}
		if part.fits(nodes) {
			continue
		}
		msg, hugePages := part.shortage(nodes)
		if hugePages {
			short = append(short, msg)
		} else {
			warnings = append(warnings, msg)
		}
	}
	if len(short) > 0 {
		return "", fmt.Errorf("the NUMA node the scheduler allocated it on no longer has its hugepages: %s; something outside the claims took them since the slices were published", strings.Join(short, "; "))
	}
	if len(warnings) > 0 {
		return fmt.Sprintf("%s; reserved anyway (the scheduler counted it, and a container outside the claims took memory of the node since)", strings.Join(warnings, "; ")), nil
	}
	return "", nil
}

// addClaim records a reservation and counts it.
func (a *Allocator) addClaim(c *ClaimMemory) {
	b := &a.claims
	b.claims[c.Key] = c
	if c.PodUID == "" {
		a.setMemory(claimHolder+c.Key, c.Held)
		return
	}
	owner := ownerKey(c.PodUID, c.Container)
	b.byOwner[owner] = append(b.byOwner[owner], c.Key)
	slices.Sort(b.byOwner[owner])
	a.refreshOwner(owner)
}

// drop forgets a reservation's record (not its count).
func (b *claimBook) drop(key string) {
	c, ok := b.claims[key]
	if !ok {
		return
	}
	delete(b.claims, key)
	if c.PodUID == "" {
		return
	}
	owner := ownerKey(c.PodUID, c.Container)
	b.byOwner[owner] = slices.DeleteFunc(b.byOwner[owner], func(k string) bool { return k == key })
	if len(b.byOwner[owner]) == 0 {
		delete(b.byOwner, owner)
	}
}

// ReleaseClaims gives back the reservations of these keys (a claim was
// unprepared); unknown keys are fine.
func (a *Allocator) ReleaseClaims(keys []string) {
	for _, key := range keys {
		c, ok := a.claims.claims[key]
		if !ok {
			continue
		}
		a.claims.drop(key)
		a.setMemory(claimHolder+key, nil)
		if c.PodUID != "" {
			a.refreshOwner(ownerKey(c.PodUID, c.Container))
		}
	}
}

// BindClaim tells that a container showed the request's token: its
// memory comes from the reservation first. A key that reserves nothing
// is fine.
func (a *Allocator) BindClaim(key, podUID, container string) {
	c, ok := a.claims.claims[key]
	if !ok || (c.PodUID == podUID && c.Container == container) {
		return
	}
	prev := ownerKey(c.PodUID, c.Container)
	a.claims.drop(key)
	bound := *c
	bound.PodUID, bound.Container = podUID, container
	a.addClaim(&bound)
	if c.PodUID != "" {
		a.refreshOwner(prev)
	}
}

// ClaimReservations returns the reservations, by key.
func (a *Allocator) ClaimReservations() map[string]ClaimMemory {
	out := make(map[string]ClaimMemory, len(a.claims.claims))
	for key, c := range a.claims.claims {
		out[key] = *c
	}
	return out
}

// followClaims is called whenever a holder's memory changes: when the
// holder is a container (or hold) bound to claims, their reservations
// count again what it does not hold.
func (a *Allocator) followClaims(id string) {
	if len(a.claims.claims) == 0 || strings.HasPrefix(id, claimHolder) {
		return
	}
	owner, ok := a.claims.ownerOf[id]
	if !ok {
		as := a.containers[id]
		if as == nil {
			as = a.holdOf(id)
		}
		if as == nil {
			return
		}
		owner = ownerKey(as.Pod.UID, as.Container)
	}
	if _, bound := a.claims.byOwner[owner]; bound || ok {
		a.refreshOwner(owner)
	}
}

// holdOf finds a hold by its stopped container's id (a hold restored at a
// restart is counted before anything bound it).
func (a *Allocator) holdOf(id string) *Assignment {
	for _, h := range a.holds {
		if h.ID == id {
			return &h.Assignment
		}
	}
	return nil
}

// refreshOwner counts the reservations bound to a container as what they
// reserve less what the container, running or held, holds: its holdings
// are taken from its claims in key order.
func (a *Allocator) refreshOwner(owner string) {
	b := &a.claims
	// What the owner's holders hold, by node: the running container and
	// the hold of its last run.
	left := map[int]*nodeUse{}
	take := func(id string) {
		for _, nm := range a.mem.held[id] {
			u := left[nm.Node]
			if u == nil {
				u = &nodeUse{pages: map[int64]int64{}}
				left[nm.Node] = u
			}
			u.memory += nm.Memory
			for _, p := range nm.HugePages {
				u.pages[p.SizeKB] += p.Count
			}
		}
		if len(a.mem.held[id]) > 0 {
			b.ownerOf[id] = owner
		} else {
			delete(b.ownerOf, id)
		}
	}
	for id, o := range b.ownerOf {
		if o == owner {
			take(id)
		}
	}
	podUID, container, _ := strings.Cut(owner, "/")
	for id := range a.byPod[podUID] {
		if as := a.containers[id]; as != nil && as.Container == container {
			if _, seen := b.ownerOf[id]; !seen {
				take(id)
			}
		}
	}
	if h := a.holds[owner]; h != nil {
		if _, seen := b.ownerOf[h.ID]; !seen {
			take(h.ID)
		}
	}
	for _, key := range b.byOwner[owner] {
		c := b.claims[key]
		var rest []NodeMemory
		for _, nm := range c.Held {
			u := left[nm.Node]
			if u == nil {
				u = &nodeUse{pages: map[int64]int64{}}
				left[nm.Node] = u
			}
			r := NodeMemory{Node: nm.Node, Memory: max(0, nm.Memory-u.memory)}
			u.memory = max(0, u.memory-nm.Memory)
			for _, p := range nm.HugePages {
				have := u.pages[p.SizeKB]
				r.HugePages = addPages(r.HugePages, p.SizeKB, max(0, p.Count-have))
				u.pages[p.SizeKB] = max(0, have-p.Count)
			}
			if r.Memory > 0 || len(r.HugePages) > 0 {
				rest = append(rest, r)
			}
		}
		a.setMemory(claimHolder+key, rest)
	}
}

// lendClaims adds to what a request may reuse the part of its claims'
// reservations its container does not hold yet: a container bound to a
// claim takes its memory from the reservation first.
func (a *Allocator) lendClaims(req Request, lent map[int]nodeUse) map[int]nodeUse {
	if req.Pod.UID == "" || len(a.claims.byOwner) == 0 {
		return lent
	}
	for _, key := range a.claims.byOwner[ownerKey(req.Pod.UID, req.Container)] {
		for _, nm := range a.mem.held[claimHolder+key] {
			if lent == nil {
				lent = map[int]nodeUse{}
			}
			u := lent[nm.Node]
			if u.pages == nil {
				u.pages = map[int64]int64{}
			} else {
				u.pages = maps.Clone(u.pages) // lentMemory's maps are its own
			}
			u.memory += nm.Memory
			for _, p := range nm.HugePages {
				u.pages[p.SizeKB] += p.Count
			}
			lent[nm.Node] = u
		}
	}
	return lent
}

// NodeOffer is what claims may be given of one NUMA node's memory: the
// scheduler counts the claims it allocates against it.
type NodeOffer struct {
	Node int
	// Memory is in bytes; -1 when the node's MemTotal is unknown.
	Memory int64
	// HugePages are pages by size, ascending: every size the node has.
	HugePages []Pages
}

// MemoryOffer is, for every NUMA node with memory in id order, what the
// DRA driver offers: the node's capacity less the host's reserve, less
// what containers outside the claims hold (a claim's container beyond its
// reservation too), and for hugepages, never more than the free pages as
// last read plus the claims' reservations (pages taken by others).
// Reservations are not subtracted: the scheduler counts them.
func (a *Allocator) MemoryOffer() []NodeOffer {
	var out []NodeOffer
	claimed := map[int]*nodeUse{}
	for _, c := range a.claims.claims {
		for _, nm := range c.Held {
			u := claimed[nm.Node]
			if u == nil {
				u = &nodeUse{pages: map[int64]int64{}}
				claimed[nm.Node] = u
			}
			u.memory += nm.Memory
			for _, p := range nm.HugePages {
				u.pages[p.SizeKB] += p.Count
			}
		}
	}
	for _, node := range a.x.topo.NUMANodes {
		if !node.HasMemory {
			continue
		}
		used, cl := a.mem.use(node.ID), claimed[node.ID]
		if cl == nil {
			cl = &nodeUse{}
		}
		o := NodeOffer{Node: node.ID, Memory: -1}
		inPages := int64(0)
		for _, hp := range a.mem.pagesOf(node.ID) {
			inPages += hp.Total * hp.SizeKB * 1024
			outside := max(0, used.count(hp.SizeKB)-cl.pages[hp.SizeKB])
			n := min(hp.Total-a.layout.HugePagesReserve[hp.SizeKB]-outside, hp.Free+cl.pages[hp.SizeKB])
			o.HugePages = append(o.HugePages, Pages{SizeKB: hp.SizeKB, Count: max(0, n)})
		}
		if node.MemTotalKB > 0 {
			outside := max(0, used.held()-cl.memory)
			o.Memory = max(0, node.MemTotalKB*1024-inPages-a.layout.MemoryReserve-outside)
		}
		out = append(out, o)
	}
	return out
}
