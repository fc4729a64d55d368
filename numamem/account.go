package numamem

import (
	"fmt"
	"slices"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// Account is the per-node accounting: what each holder holds, their sum by
// node, the nodes' capacity as last read and the host's reserve. The
// per-node figures are slices indexed by node id, not maps: a decision
// reads every node's, and NUMA node ids are small and dense.
//
// It is not safe for concurrent use; its owner (the allocator) serializes
// calls.
type Account struct {
	// nodes are the topology's NUMA nodes, by position; serving is, by the
	// same position, the node whose memory serves a node's CPUs (itself, or
	// a memory-less node's nearest node with memory; sysfs.Unknown when no
	// node has memory).
	nodes   []sysfs.NUMANode
	serving []int
	// memoryReserve is memory.reservedPerNode in bytes, hugeReserve the
	// pages of each size (in KiB) hugePagesReservedPerNode keeps: the
	// host's, on every node.
	memoryReserve int64
	hugeReserve   map[int64]int64
	// held is by holder id (a container's id, which a hold keeps; a
	// claim's reservation's claimHolder key): setting a holder's memory
	// replaces what it held, so nothing is ever counted twice.
	held map[string][]NodeMemory
	// used is by node id; it grows for a holding that names a node the
	// topology lacks (a state file's), so that giving it back balances.
	used []nodeCount
	// pages are, by node id, the nodes' hugepage pools as last read: at
	// discovery, then at each decision that involves hugepages. A reading
	// replaces a node's only when it is no older (see KeepPages).
	pages [][]sysfs.HugePages
	// claims are the memory DRA claims reserve (claims.go), and owners who
	// is bound to them.
	claims claimBook
	owners Owners
}

// New returns an account of the nodes of topo in which nothing is held.
// serving is, by the position of each node in topo.NUMANodes, the node
// whose memory serves its CPUs; memoryReserve and hugeReserve are what the
// host keeps of each node; owners answers who a holder is for the claims
// (nil when none are ever reserved).
func New(topo *sysfs.Topology, serving []int, memoryReserve int64, hugeReserve map[int64]int64, owners Owners) Account {
	maxID := -1
	for _, n := range topo.NUMANodes {
		maxID = max(maxID, n.ID)
	}
	m := Account{nodes: topo.NUMANodes, serving: serving, memoryReserve: memoryReserve, hugeReserve: hugeReserve, owners: owners,
		held: map[string][]NodeMemory{}, used: make([]nodeCount, maxID+1), pages: make([][]sysfs.HugePages, maxID+1)}
	for _, n := range topo.NUMANodes {
		if n.ID >= 0 {
			// The account's own copy, which a reading updates in place.
			m.pages[n.ID] = slices.Clone(n.HugePages)
		}
	}
	return m
}

// nodeUse is memory and hugepages by size, summed over some holdings:
// what a request may reuse (Lent) and what claims hold.
type nodeUse struct {
	memory int64
	pages  map[int64]int64 // by size in KiB
	// untouched is, in a Lent, the part of pages lent from claims'
	// reservations that no container holds (LendClaims): no process
	// faulted them in, so they are among free_hugepages.
	untouched map[int64]int64
}

// useOf is node's entry of uses, made on first use.
func useOf(uses map[int]*nodeUse, node int) *nodeUse {
	u := uses[node]
	if u == nil {
		u = &nodeUse{pages: map[int64]int64{}}
		uses[node] = u
	}
	return u
}

// addUse adds what held holds on each node to uses.
func addUse(uses map[int]*nodeUse, held []NodeMemory) {
	for _, nm := range held {
		u := useOf(uses, nm.Node)
		u.memory += nm.Memory
		for _, p := range nm.HugePages {
			u.pages[p.SizeKB] += p.Count
		}
	}
}

// nodeCount is one node's counts in the account: a short list of sizes,
// which a decision reads without hashing.
type nodeCount struct {
	memory int64
	pages  []Pages // by size, ascending; a count may fall back to 0
}

// heldMemory is the memory held on the node; nil holds none.
func (u *nodeCount) heldMemory() int64 {
	if u == nil {
		return 0
	}
	return u.memory
}

// heldPages is the pages held on the node by size; nil holds none.
func (u *nodeCount) heldPages() []Pages {
	if u == nil {
		return nil
	}
	return u.pages
}

// count is the pages of a size held on the node; nil holds none.
func (u *nodeCount) count(sizeKB int64) int64 {
	if u == nil {
		return 0
	}
	for _, p := range u.pages {
		if p.SizeKB == sizeKB {
			return p.Count
		}
	}
	return 0
}

// addCount adds n pages of a size, in place: the list is the account's own.
func (u *nodeCount) addCount(sizeKB, n int64) {
	i, found := slices.BinarySearchFunc(u.pages, sizeKB, func(p Pages, s int64) int { return cmpInt64(p.SizeKB, s) })
	if found {
		u.pages[i].Count += n
		return
	}
	u.pages = slices.Insert(u.pages, i, Pages{SizeKB: sizeKB, Count: n})
}

// use is the node's counts; nil for a node nobody ever held anything of.
func (m *Account) use(node int) *nodeCount {
	if node < 0 || node >= len(m.used) {
		return nil
	}
	return &m.used[node]
}

// PagesOf is the node's hugepage pools as last read. The slice is the
// account's: the caller must not change it.
func (m *Account) PagesOf(node int) []sysfs.HugePages {
	if node < 0 || node >= len(m.pages) {
		return nil
	}
	return m.pages[node]
}

// Held is what a holder holds, nil when nothing. The slice is the
// account's: the caller must not change it.
func (m *Account) Held(id string) []NodeMemory { return m.held[id] }

// Set makes what holder id holds of the nodes' memory held, in place of
// what it held before; nil gives it all back. It is the one change the
// account is told of.
func (m *Account) Set(id string, held []NodeMemory) {
	defer m.followClaims(id) // a claim's container takes from its reservation
	// One map operation in the usual cases, a new holder or one giving
	// all back: they run in every decision and release.
	if old, ok := m.held[id]; ok {
		for _, nm := range old {
			m.add(nm, -1)
		}
		if len(held) == 0 {
			delete(m.held, id)
			return
		}
	}
	if len(held) == 0 {
		return
	}
	m.held[id] = held
	for _, nm := range held {
		m.add(nm, 1)
	}
}

func (m *Account) add(nm NodeMemory, sign int64) {
	if nm.Node < 0 {
		return // no node: never counted, so never given back either
	}
	if nm.Node >= len(m.used) {
		m.used = append(m.used, make([]nodeCount, nm.Node+1-len(m.used))...)
	}
	u := &m.used[nm.Node]
	u.memory += sign * nm.Memory
	for _, p := range nm.HugePages {
		u.addCount(p.SizeKB, sign*p.Count)
	}
}

// KeepPages keeps a node's hugepage reading, size by size, unless the one
// kept is newer: a creation reads the counts before it takes the plugin's
// lock, so a reading begun earlier may be handed over later, and must not
// replace the newer counts (the decision then uses those). A reading may
// hold only the sizes a decision asks for; the other sizes keep theirs.
func (m *Account) KeepPages(node int, hp []sysfs.HugePages) {
	if node < 0 || node >= len(m.pages) {
		return // not a node of the topology: no decision reads it
	}
	for _, p := range hp {
		cur := m.pages[node] // the account's own (New): updated in place
		i := 0               // a handful of sizes: a scan is quicker than a search
		for i < len(cur) && cur[i].SizeKB < p.SizeKB {
			i++
		}
		switch {
		case i == len(cur) || cur[i].SizeKB != p.SizeKB:
			m.pages[node] = slices.Insert(cur, i, p)
		case cur[i].Seq <= p.Seq:
			cur[i] = p
		}
	}
}

// MemoryNodes are the ids of the NUMA nodes with memory.
func (m *Account) MemoryNodes() []int {
	out := make([]int, 0, len(m.nodes))
	for _, n := range m.nodes {
		if n.HasMemory && n.ID >= 0 {
			out = append(out, n.ID)
		}
	}
	return out
}

// Verify checks the account's invariants: each node's count is the sum of
// what the holders hold there (nothing counted twice, nothing left behind
// by a holder that gave it back), and no count is negative.
func (m *Account) Verify() error {
	want := make([]nodeCount, len(m.used))
	for _, held := range m.held {
		for _, nm := range held {
			if nm.Node < 0 {
				continue
			}
			if nm.Node >= len(want) {
				return fmt.Errorf("node %d is held but not counted", nm.Node)
			}
			want[nm.Node].memory += nm.Memory
			for _, p := range nm.HugePages {
				want[nm.Node].addCount(p.SizeKB, p.Count)
			}
		}
	}
	for n := range m.used {
		u, w := &m.used[n], &want[n]
		if u.memory < 0 {
			return fmt.Errorf("node %d: memory counted %d, below zero", n, u.memory)
		}
		if u.memory != w.memory {
			return fmt.Errorf("node %d: memory counted %d, held %d", n, u.memory, w.memory)
		}
		for _, p := range u.pages {
			if p.Count < 0 {
				return fmt.Errorf("node %d: %d pages of %d kB counted, below zero", n, p.Count, p.SizeKB)
			}
		}
		for _, p := range append(slices.Clone(u.pages), w.pages...) {
			if got, held := u.count(p.SizeKB), w.count(p.SizeKB); got != held {
				return fmt.Errorf("node %d: %d pages of %d kB counted, held %d", n, got, p.SizeKB, held)
			}
		}
	}
	return nil
}
