package numamem

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

// Owners tells the account which container a holder is, for the claims
// bound to containers: the account knows holders only by id.
type Owners interface {
	// OwnerOf names the container holder id is: a running container, or
	// the hold of a stopped one (by its id); false when neither.
	OwnerOf(id string) (podUID, container string, ok bool)
	// HoldersOf are the ids of a container's holders: its running
	// instances and the hold of its last run.
	HoldersOf(podUID, container string) []string
}

// claimHolder prefixes a reservation's holder id; container ids are hex.
const claimHolder = "claim:"

// claimBook is the reservations and who is bound to them.
type claimBook struct {
	claims map[string]*ClaimMemory
	// byOwner lists the keys bound to a container ("<pod uid>/<name>"),
	// sorted.
	byOwner map[string][]string
	// ownerOf remembers the owner of each holder id bound to a claim: a
	// container's memory is given back after it left the caller's books.
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
func (m *Account) ReserveClaim(c ClaimMemory, now map[int][]sysfs.HugePages, check bool) (warning string, err error) {
	b := &m.claims
	if b.claims == nil {
		b.claims, b.byOwner, b.ownerOf = map[string]*ClaimMemory{}, map[string][]string{}, map[string]string{}
	}
	old, had := b.claims[c.Key]
	b.drop(c.Key)
	m.Set(claimHolder+c.Key, nil) // its own reservation is nobody else's
	if check {
		warning, err = m.claimFits(c, now)
		if err != nil {
			if had {
				m.addClaim(old)
			}
			return "", err
		}
	}
	c.Held = slices.Clone(c.Held)
	m.addClaim(&c)
	if had && old.PodUID != "" && (old.PodUID != c.PodUID || old.Container != c.Container) {
		// Its container's other claims take what this one no longer does.
		m.refreshOwner(ownerKey(old.PodUID, old.Container))
	}
	return warning, nil
}

// claimFits tells whether the nodes hold a reservation now.
func (m *Account) claimFits(c ClaimMemory, now map[int][]sysfs.HugePages) (string, error) {
	fit := m.Fit(new(Fit), DemandOf(c.Held), nil, now, false)
	var short, warnings []string
	for _, nm := range c.Held {
		// The fit of this node's part alone, in Fit's form, so that the
		// message is the decision's.
		part := &Fit{demand: Demand{Memory: nm.Memory, HugePages: nm.HugePages}, memory: fit.memory}
		for _, p := range nm.HugePages {
			i := slices.IndexFunc(fit.demand.HugePages, func(q Pages) bool { return q.SizeKB == p.SizeKB })
			part.pages = append(part.pages, fit.pages[i])
		}
		nodes := []int{nm.Node}
		if part.Fits(nodes) {
			continue
		}
		msg, hugePages := part.Shortage(nodes)
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
func (m *Account) addClaim(c *ClaimMemory) {
	b := &m.claims
	b.claims[c.Key] = c
	if c.PodUID == "" {
		m.Set(claimHolder+c.Key, c.Held)
		return
	}
	owner := ownerKey(c.PodUID, c.Container)
	b.byOwner[owner] = append(b.byOwner[owner], c.Key)
	slices.Sort(b.byOwner[owner])
	m.refreshOwner(owner)
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
func (m *Account) ReleaseClaims(keys []string) {
	for _, key := range keys {
		c, ok := m.claims.claims[key]
		if !ok {
			continue
		}
		m.claims.drop(key)
		m.Set(claimHolder+key, nil)
		if c.PodUID != "" {
			m.refreshOwner(ownerKey(c.PodUID, c.Container))
		}
	}
}

// BindClaim tells that a container showed the request's token: its
// memory comes from the reservation first. A key that reserves nothing
// is fine.
func (m *Account) BindClaim(key, podUID, container string) {
	c, ok := m.claims.claims[key]
	if !ok || (c.PodUID == podUID && c.Container == container) {
		return
	}
	prev := ownerKey(c.PodUID, c.Container)
	m.claims.drop(key)
	bound := *c
	bound.PodUID, bound.Container = podUID, container
	m.addClaim(&bound)
	if c.PodUID != "" {
		m.refreshOwner(prev)
	}
}

// ClaimReservations returns the reservations, by key.
func (m *Account) ClaimReservations() map[string]ClaimMemory {
	out := make(map[string]ClaimMemory, len(m.claims.claims))
	for key, c := range m.claims.claims {
		out[key] = *c
	}
	return out
}

// followClaims is called whenever a holder's memory changes: when the
// holder is a container (or hold) bound to claims, their reservations
// count again what it does not hold.
func (m *Account) followClaims(id string) {
	if len(m.claims.claims) == 0 || strings.HasPrefix(id, claimHolder) {
		return
	}
	owner, ok := m.claims.ownerOf[id]
	if !ok {
		if m.owners == nil {
			return
		}
		podUID, container, known := m.owners.OwnerOf(id)
		if !known {
			return
		}
		owner = ownerKey(podUID, container)
	}
	if _, bound := m.claims.byOwner[owner]; bound || ok {
		m.refreshOwner(owner)
	}
}

// refreshOwner counts the reservations bound to a container as what they
// reserve less what the container, running or held, holds: its holdings
// are taken from its claims in key order.
func (m *Account) refreshOwner(owner string) {
	b := &m.claims
	// What the owner's holders hold, by node: the running container and
	// the hold of its last run.
	left := map[int]*nodeUse{}
	take := func(id string) {
		addUse(left, m.held[id])
		if len(m.held[id]) > 0 {
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
	if m.owners != nil {
		podUID, container, _ := strings.Cut(owner, "/")
		for _, id := range m.owners.HoldersOf(podUID, container) {
			if _, seen := b.ownerOf[id]; !seen {
				take(id)
			}
		}
	}
	for _, key := range b.byOwner[owner] {
		c := b.claims[key]
		var rest []NodeMemory
		for _, nm := range c.Held {
			u := useOf(left, nm.Node)
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
		m.Set(claimHolder+key, rest)
	}
}

// LendClaims adds to lent the part of the reservations bound to a
// container that it does not hold yet: a container bound to a claim takes
// its memory from the reservation first.
func (m *Account) LendClaims(lent Lent, podUID, container string) Lent {
	if podUID == "" || len(m.claims.byOwner) == 0 {
		return lent
	}
	for _, key := range m.claims.byOwner[ownerKey(podUID, container)] {
		for _, nm := range m.held[claimHolder+key] {
			if lent == nil {
				lent = Lent{}
			}
			u := lent[nm.Node]
			if u.pages == nil {
				u.pages = map[int64]int64{}
			} else {
				u.pages = maps.Clone(u.pages) // LendHeld's maps are its own
			}
			if u.untouched == nil {
				u.untouched = map[int64]int64{}
			} else {
				u.untouched = maps.Clone(u.untouched)
			}
			u.memory += nm.Memory
			for _, p := range nm.HugePages {
				u.pages[p.SizeKB] += p.Count
				u.untouched[p.SizeKB] += p.Count
			}
			lent[nm.Node] = u
		}
	}
	return lent
}

// untouchedPages is the pages of a size that the claims' reservations
// hold on a node and that no container holds (the part of each
// reservation its container, if any, does not hold: see refreshOwner). No
// process faulted them in, so they are still among free_hugepages, yet
// they are the claims': free_hugepages less them is what the claims leave
// free, and a floor of free_hugepages alone would count them twice (once
// held, once free).
func (m *Account) untouchedPages(node int, sizeKB int64) int64 {
	n := int64(0)
	for key := range m.claims.claims {
		for _, nm := range m.held[claimHolder+key] {
			if nm.Node != node {
				continue
			}
			for _, p := range nm.HugePages {
				if p.SizeKB == sizeKB {
					n += p.Count
				}
			}
		}
	}
	return n
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
// last read plus the claims' reservations (pages taken by others). The
// part of the reservations no container holds is untouched, so it is
// among the free pages already: it is taken off them first, or it would
// be counted twice.
// Reservations are not subtracted: the scheduler counts them.
func (m *Account) MemoryOffer() []NodeOffer {
	var out []NodeOffer
	claimed := map[int]*nodeUse{}
	for _, c := range m.claims.claims {
		addUse(claimed, c.Held)
	}
	for _, node := range m.nodes {
		if !node.HasMemory {
			continue
		}
		used, cl := m.use(node.ID), claimed[node.ID]
		if cl == nil {
			cl = &nodeUse{}
		}
		o := NodeOffer{Node: node.ID, Memory: -1}
		inPages := int64(0)
		for _, hp := range m.PagesOf(node.ID) {
			inPages += hp.Total * hp.SizeKB * 1024
			outside := max(0, used.count(hp.SizeKB)-cl.pages[hp.SizeKB])
			n := min(hp.Total-m.hugeReserve[hp.SizeKB]-outside, hp.Free-m.untouchedPages(node.ID, hp.SizeKB)+cl.pages[hp.SizeKB])
			o.HugePages = append(o.HugePages, Pages{SizeKB: hp.SizeKB, Count: max(0, n)})
		}
		if node.MemTotalKB > 0 {
			outside := max(0, used.heldMemory()-cl.memory)
			o.Memory = max(0, node.MemTotalKB*1024-inPages-m.memoryReserve-outside)
		}
		out = append(out, o)
	}
	return out
}
