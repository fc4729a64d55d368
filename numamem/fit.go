package numamem

import (
	"fmt"
	"slices"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// Fit is what a demand may have of each node's memory, worked out once per
// decision (Account.Fit): the one question the account answers, asked of
// sets of nodes (Fits) and of an order of them (Split).
type Fit struct {
	demand Demand
	// memory is the memory available by node id; -1 for a node whose
	// MemTotal is unknown, or that has no memory: it holds any amount.
	memory []int64
	// pages is, by position in demand.HugePages, the pages of that size
	// available by node id.
	pages [][]int64
	// reserve is, by position in demand.HugePages, the host's reserve of
	// that size per node.
	reserve []int64
	// anyNodes tells that each NUMA node's memory alone holds the whole
	// demand: rule 0 then rules out no set of nodes, and the placement is
	// the one without memory (the common case: a memory limit on a node
	// with room), with none of the search's memory checks.
	anyNodes bool
	// ignoreMemory is set when no set of nodes holds the memory limit: the
	// request is then placed by the other rules, with a warning.
	ignoreMemory bool
	warning      string
	// lent is what the holders the demand may reuse hold, by node.
	lent Lent
	// running tells that the demand's container runs already (counted at
	// a restart): its own pages are faulted in, so free_hugepages is no
	// floor, and Split's last node takes the pages the others lack, as it
	// does the memory.
	running bool
}

// Lent is what holders a demand may reuse hold, by node: memory the
// account counts as held, and that the demand may have nonetheless (a
// hold of the same pod, a claim's reservation for the same container).
type Lent map[int]nodeUse

// LendHeld adds to lent what holder id holds; a nil lent is one that
// lends nothing, and it stays nil when id holds nothing.
func (m *Account) LendHeld(lent Lent, id string) Lent {
	for _, nm := range m.held[id] {
		if lent == nil {
			lent = Lent{}
		}
		u := lent[nm.Node]
		if u.pages == nil {
			u.pages = map[int64]int64{}
		}
		u.memory += nm.Memory
		for _, p := range nm.HugePages {
			u.pages[p.SizeKB] += p.Count
		}
		lent[nm.Node] = u
	}
	return lent
}

// Fit works out the demand's memory on every node, by the rule of
// docs/placement.md: a node's hugepages of a size available to it are
//
//	min(nr_hugepages − reserve − held, free_hugepages − untouched)
//
// where held are the pages the account counts there, less those lent
// (the holders the demand may reuse), and untouched the pages of claims'
// reservations no container holds, less those lent: no process faulted
// them in, so they are among free_hugepages, and they are not this
// demand's; its memory is MemTotal − the memory
// of its hugepage pools − reserve − held. now, when not nil, are the
// hugepage counts read for this decision (kept as KeepPages keeps them).
// For a container that runs already (running) free_hugepages is no floor:
// the pages it touched are not free any more, but they are its own.
//
// The fit is worked out in f, whose buffers are reused: a decision makes
// one, and allocating its figures was a third of what memory added to it.
func (m *Account) Fit(f *Fit, d Demand, lent Lent, now map[int][]sysfs.HugePages, running bool) *Fit {
	if len(now) > 0 {
		for _, node := range m.nodes { // lookups by id are quicker than ranging over the map
			if hp, ok := now[node.ID]; ok {
				m.KeepPages(node.ID, hp)
			}
		}
	}
	ids := len(m.pages)
	*f = Fit{demand: d, memory: fill(f.memory, ids, -1), pages: f.pages[:0], reserve: f.reserve, running: running}
	for range d.HugePages {
		i := len(f.pages)
		if i < cap(f.pages) {
			f.pages = f.pages[:i+1]
		} else {
			f.pages = append(f.pages, nil)
		}
		f.pages[i] = fill(f.pages[i], ids, 0)
	}
	f.reserve = f.reserve[:0]
	for _, want := range d.HugePages {
		f.reserve = append(f.reserve, m.hugeReserve[want.SizeKB]) // once, not per node
	}
	f.lent = lent
	for i := range m.nodes {
		m.fitNode(f, &m.nodes[i])
	}
	f.anyNodes = m.eachNodeHolds(f)
	return f
}

// Refit works out a fit again for the nodes given, from their counts as
// last read: a decision that read some nodes' counts after its placement
// checks the placement against them (StillHolds).
func (m *Account) Refit(f *Fit, nodes []int) {
	for _, n := range nodes {
		for i := range m.nodes {
			if m.nodes[i].ID == n {
				m.fitNode(f, &m.nodes[i])
				break
			}
		}
	}
}

// fitNode works out what a fit's demand may have of one node, from the
// counts last read.
func (m *Account) fitNode(f *Fit, node *sysfs.NUMANode) {
	if !node.HasMemory || node.ID < 0 {
		return
	}
	u := m.use(node.ID)
	l := f.lent[node.ID]
	hps := m.PagesOf(node.ID)
	inPages := int64(0)
	for _, hp := range hps {
		inPages += hp.Total * hp.SizeKB * 1024
	}
	if node.MemTotalKB > 0 {
		f.memory[node.ID] = freeMemory(node.MemTotalKB*1024-inPages, m.memoryReserve, u.heldMemory()-l.memory)
	}
	for i, want := range f.demand.HugePages {
		var total, free int64
		for _, hp := range hps {
			if hp.SizeKB == want.SizeKB {
				total, free = hp.Total, hp.Free
			}
		}
		// The claims' untouched pages are among the free ones, and not
		// this demand's unless lent to it.
		if untouched := m.untouchedPages(node.ID, want.SizeKB) - l.untouched[want.SizeKB]; untouched > 0 {
			free -= untouched
		}
		f.pages[i][node.ID] = freePages(total, free, f.reserve[i], u.count(want.SizeKB)-l.pages[want.SizeKB], f.running)
	}
}

// freeMemory is the memory of a node a container may have: its capacity
// (MemTotal less its hugepage pools) less the host's reserve and what is
// held there. The decision and the report (status, metrics) both use it,
// so that what status calls free is what a container gets.
func freeMemory(capacity, reserve, held int64) int64 {
	return max(0, capacity-reserve-held)
}

// freePages is the pages of one size of a node a container may have:
// nr_hugepages less the host's reserve and what is held there, and no more
// than free (free_hugepages as last read, less the claims' untouched
// pages: see untouchedPages), which catches pages something we do not
// count took, except for a running container, whose own touched pages are
// not free.
func freePages(total, free, reserve, held int64, running bool) int64 {
	avail := total - reserve - held
	if !running {
		avail = min(avail, free)
	}
	return max(0, avail)
}

// fill returns buf resized to n, every value v.
func fill(buf []int64, n int, v int64) []int64 {
	buf = slices.Grow(buf[:0], n)[:n]
	for i := range buf {
		buf[i] = v
	}
	return buf
}

// eachNodeHolds tells whether the memory serving each NUMA node holds the
// whole demand by itself: then every set of nodes does.
func (m *Account) eachNodeHolds(f *Fit) bool {
	for _, s := range m.serving {
		if s == sysfs.Unknown {
			return false
		}
		for i, want := range f.demand.HugePages {
			if f.pagesAt(i, s) < want.Count {
				return false
			}
		}
		if avail := f.memoryAt(s); f.demand.Memory > 0 && avail >= 0 && avail < f.demand.Memory {
			return false
		}
	}
	return true
}

// AnyNodes tells that the memory serving each NUMA node holds the whole
// demand by itself: memory rules no set of nodes out, and the first node
// of any order holds all of it (OnNode).
func (f *Fit) AnyNodes() bool { return f.anyNodes }

// AsksHugePages tells that the demand asks for hugepages.
func (f *Fit) AsksHugePages() bool { return len(f.demand.HugePages) > 0 }

// MemoryIgnored tells that the memory limit was set aside (no set of nodes
// holds it: IgnoreMemory, Refusal); only hugepages then rule nodes out.
func (f *Fit) MemoryIgnored() bool { return f.ignoreMemory }

// IgnoreMemory sets the memory limit aside: a limit is a ceiling, not a
// reservation, so where no set of nodes holds it the container is placed
// by the other rules, and Split still counts it.
func (f *Fit) IgnoreMemory() { f.ignoreMemory = true }

// Warning is what the operator should know of a placement made with the
// memory limit set aside (Refusal); "" when it was not.
func (f *Fit) Warning() string { return f.warning }

// memoryAt is the memory available on a node, -1 when it holds any amount.
func (f *Fit) memoryAt(n int) int64 {
	if n < 0 || n >= len(f.memory) {
		return -1
	}
	return f.memory[n]
}

// pagesAt is the pages of the demand's i-th size available on a node.
func (f *Fit) pagesAt(i, n int) int64 {
	if n < 0 || n >= len(f.pages[i]) {
		return 0
	}
	return f.pages[i][n]
}

// Fits tells whether the memory of the nodes can hold the demand.
func (f *Fit) Fits(memNodes []int) bool {
	if f.anyNodes && len(memNodes) > 0 {
		return true
	}
	for i, want := range f.demand.HugePages {
		sum := int64(0)
		for _, n := range memNodes {
			sum += f.pagesAt(i, n)
		}
		if sum < want.Count {
			return false
		}
	}
	if f.ignoreMemory || f.demand.Memory <= 0 {
		return true
	}
	sum := int64(0)
	for _, n := range memNodes {
		avail := f.memoryAt(n)
		if avail < 0 {
			return true
		}
		sum += avail
	}
	return sum >= f.demand.Memory
}

// FitsMemory is Fits for the memory limit alone.
func (f *Fit) FitsMemory(memNodes []int) bool {
	g := *f
	g.demand.HugePages, g.ignoreMemory, g.anyNodes = nil, false, false
	return g.Fits(memNodes)
}

// Split takes the demand from the nodes, in the order given (the nodes of
// its CPUs first), each up to what it has; the last node takes what is
// left of the memory limit when it is over-committed, and, for a running
// container, of its hugepages.
func (f *Fit) Split(order []int) []NodeMemory {
	out := make([]NodeMemory, 0, len(order))
	at := func(n int) *NodeMemory {
		for i := range out {
			if out[i].Node == n {
				return &out[i]
			}
		}
		out = append(out, NodeMemory{Node: n})
		return &out[len(out)-1]
	}
	for i, want := range f.demand.HugePages {
		left := want.Count
		for j, n := range order {
			take := min(left, f.pagesAt(i, n))
			if f.running && j == len(order)-1 {
				take = left
			}
			if take > 0 {
				nm := at(n)
				nm.HugePages = addPages(nm.HugePages, want.SizeKB, take)
				left -= take
			}
		}
	}
	if left := f.demand.Memory; left > 0 && len(order) > 0 {
		for j, n := range order {
			avail := f.memoryAt(n)
			take := min(left, avail)
			if avail < 0 || j == len(order)-1 {
				take = left
			}
			if take > 0 {
				at(n).Memory += take
				left -= take
			}
		}
	}
	out = slices.DeleteFunc(out, func(nm NodeMemory) bool { return nm.Memory == 0 && len(nm.HugePages) == 0 })
	slices.SortFunc(out, func(x, y NodeMemory) int { return x.Node - y.Node })
	return out
}

// Covered checks that a split holds every hugepage asked for: a container
// is never pinned to nodes without its hugepages.
func (f *Fit) Covered(held []NodeMemory) error {
	for _, want := range f.demand.HugePages {
		got := int64(0)
		for _, nm := range held {
			for _, p := range nm.HugePages {
				if p.SizeKB == want.SizeKB {
					got += p.Count
				}
			}
		}
		if got != want.Count {
			return fmt.Errorf("its hugepages do not fit the NUMA nodes of its CPUs (%v)", held)
		}
	}
	return nil
}

// StillHolds tells whether each node still has what held holds there, by
// the fit's figures (after Refit): its hugepages, and its memory unless
// the memory limit was set aside.
func (f *Fit) StillHolds(held []NodeMemory) bool {
	for _, nm := range held {
		for i, want := range f.demand.HugePages {
			for _, p := range nm.HugePages {
				if p.SizeKB == want.SizeKB && p.Count > f.pagesAt(i, nm.Node) {
					return false
				}
			}
		}
		if avail := f.memoryAt(nm.Node); !f.ignoreMemory && avail >= 0 && nm.Memory > avail {
			return false
		}
	}
	return true
}
