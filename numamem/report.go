package numamem

import (
	"cmp"
	"slices"

	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// NodeMemoryUse is one node's memory figures, as the tests and status see
// them: what the holders hold there.
type NodeMemoryUse struct {
	Node      int
	Memory    int64
	HugePages map[int64]int64
}

// Use returns what the holders hold, by node in the topology's order (id
// order); nodes nobody holds anything of are left out.
func (m *Account) Use() []NodeMemoryUse {
	var out []NodeMemoryUse
	for _, node := range m.nodes {
		u := m.use(node.ID)
		if u == nil {
			continue
		}
		nu := NodeMemoryUse{Node: node.ID, Memory: u.memory, HugePages: map[int64]int64{}}
		for _, p := range u.pages {
			if p.Count != 0 {
				nu.HugePages[p.SizeKB] = p.Count
			}
		}
		if nu.Memory != 0 || len(nu.HugePages) > 0 {
			out = append(out, nu)
		}
	}
	return out
}

// Counts returns every node's counts as the account keeps them, by node
// id, with the sizes whose count fell back to 0, and the nodes the
// topology lacks that a holding named: what an invariant check compares
// with the holdings it expects.
func (m *Account) Counts() []NodeMemoryUse {
	out := make([]NodeMemoryUse, len(m.used))
	for n, u := range m.used {
		out[n] = NodeMemoryUse{Node: n, Memory: u.memory, HugePages: map[int64]int64{}}
		for _, p := range u.pages {
			out[n].HugePages[p.SizeKB] = p.Count
		}
	}
	return out
}

// NodeMemoryReport is one NUMA node's memory as the account counts it,
// for the metrics: what it has, what the host keeps and what the holders
// hold.
type NodeMemoryReport struct {
	Node int
	// Capacity is the memory in bytes the memory limits are counted
	// against: MemTotal less the memory of the node's hugepage pools as
	// last read; -1 when MemTotal is unknown.
	Capacity int64
	// Reserved is memory.reservedPerNode in bytes, and Held the memory
	// limits counted on the node.
	Reserved, Held int64
	// Free is what a container whose memory is pinned may still have of
	// the node (the decision's rule, freeMemory); -1 with Capacity.
	Free int64
	// HugePages are by size, ascending: every size the node has, and
	// every size reserved or held there.
	HugePages []PagesReport
}

// PagesReport is one hugepage size of a node: Total is nr_hugepages as
// last read (never re-read for a report), Reserved the host's reserve,
// Held the pages counted for the holders, and Free what a container may
// still have (the decision's rule, freePages, with free_hugepages as last
// read).
type PagesReport struct {
	SizeKB                      int64
	Total, Reserved, Held, Free int64
}

// Report reports every NUMA node with memory, in id order, from the
// counts last read: it reads no file. The state writer asks for it at
// every write (issue 45), so a node's sizes are gathered in one small
// slice, not in maps.
func (m *Account) Report() []NodeMemoryReport {
	out := make([]NodeMemoryReport, 0, len(m.nodes))
	for _, node := range m.nodes {
		if !node.HasMemory {
			continue
		}
		r := NodeMemoryReport{Node: node.ID, Capacity: -1, Free: -1, Reserved: m.memoryReserve}
		u := m.use(node.ID)
		r.Held = u.heldMemory()
		// Free holds free_hugepages as last read until the end (0 for a
		// size the node has no pool of).
		var sizes []PagesReport
		at := func(size int64) *PagesReport {
			for i := range sizes {
				if sizes[i].SizeKB == size {
					return &sizes[i]
				}
			}
			sizes = append(sizes, PagesReport{SizeKB: size})
			return &sizes[len(sizes)-1]
		}
		inPages := int64(0)
		for _, hp := range m.PagesOf(node.ID) {
			p := at(hp.SizeKB)
			p.Total, p.Free = hp.Total, hp.Free
			inPages += hp.Total * hp.SizeKB * 1024
		}
		for size, n := range m.hugeReserve {
			at(size).Reserved = n
		}
		for _, p := range u.heldPages() {
			if p.Count != 0 {
				at(p.SizeKB).Held = p.Count
			}
		}
		if node.MemTotalKB > 0 {
			r.Capacity = max(0, node.MemTotalKB*1024-inPages)
			r.Free = freeMemory(r.Capacity, r.Reserved, r.Held)
		}
		slices.SortFunc(sizes, func(a, b PagesReport) int { return cmp.Compare(a.SizeKB, b.SizeKB) })
		for i := range sizes {
			p := &sizes[i]
			p.Free = freePages(p.Total, p.Free-m.untouchedPages(node.ID, p.SizeKB), p.Reserved, p.Held, false)
		}
		r.HugePages = sizes
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// NUMAMemoryStatus is the memory report in the form the state file keeps
// for `nri-cpupool status` and `simulate --json` prints: the same figures
// as the metrics, one conversion for both.
func NUMAMemoryStatus(reports []NodeMemoryReport) []state.NUMAMemory {
	if len(reports) == 0 {
		return nil
	}
	out := make([]state.NUMAMemory, 0, len(reports))
	for _, r := range reports {
		nm := state.NUMAMemory{Node: r.Node, Memory: state.NUMAMemoryBytes{Reserved: r.Reserved, Held: r.Held}}
		if r.Capacity >= 0 {
			capacity, free := r.Capacity, r.Free
			nm.Memory.Capacity, nm.Memory.Free = &capacity, &free
		}
		for _, p := range r.HugePages {
			nm.HugePages = append(nm.HugePages, state.NUMAHugePages{Size: sysfs.HugePageSizeName(p.SizeKB),
				Total: p.Total, Reserved: p.Reserved, Held: p.Held, Free: p.Free})
		}
		out = append(out, nm)
	}
	return out
}
