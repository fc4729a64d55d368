package numamem

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// reportBefore45 is Report as it was before issue 45 made it gather a
// node's sizes in a slice (maps and a sorted key list): the reference
// that TestReportAsBefore holds the rewrite to.
func (m *Account) reportBefore45() []NodeMemoryReport {
	var out []NodeMemoryReport
	for _, node := range m.nodes {
		if !node.HasMemory {
			continue
		}
		r := NodeMemoryReport{Node: node.ID, Capacity: -1, Free: -1, Reserved: m.memoryReserve}
		u := m.use(node.ID)
		r.Held = u.heldMemory()
		sizes := map[int64]*PagesReport{}
		at := func(size int64) *PagesReport {
			if sizes[size] == nil {
				sizes[size] = &PagesReport{SizeKB: size}
			}
			return sizes[size]
		}
		inPages, lastFree := int64(0), map[int64]int64{}
		for _, hp := range m.PagesOf(node.ID) {
			at(hp.SizeKB).Total = hp.Total
			lastFree[hp.SizeKB] = hp.Free
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
		for _, size := range slices.Sorted(maps.Keys(sizes)) {
			p := sizes[size]
			p.Free = freePages(p.Total, lastFree[size], p.Reserved, p.Held, false)
			r.HugePages = append(r.HugePages, *p)
		}
		out = append(out, r)
	}
	return out
}

// TestReportAsBefore: Report gives what it gave before its rewrite, nil
// slices included, for every shape of node: without memory, MemTotal
// unknown, no hugepages, pools listed in any order of size, sizes only
// reserved or only held (and held counts back to 0), ids with gaps.
func TestReportAsBefore(t *testing.T) {
	sizes := []int64{kb2M, kb1G, 64, 32768}
	for seed := int64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		topo := &sysfs.Topology{}
		var serving []int
		for id := 0; id < 1+r.Intn(4); id++ {
			n := sysfs.NUMANode{ID: id*(1+r.Intn(2)) + len(topo.NUMANodes), HasMemory: r.Intn(4) > 0, MemTotalKB: int64(r.Intn(3)) << 22}
			for _, i := range r.Perm(len(sizes))[:r.Intn(len(sizes)+1)] {
				total := int64(r.Intn(40))
				n.HugePages = append(n.HugePages, sysfs.HugePages{SizeKB: sizes[i], Total: total, Free: int64(r.Intn(int(total) + 1))})
			}
			topo.NUMANodes = append(topo.NUMANodes, n)
			serving = append(serving, n.ID)
		}
		reserve := map[int64]int64{}
		for _, i := range r.Perm(len(sizes))[:r.Intn(3)] {
			reserve[sizes[i]] = int64(r.Intn(4))
		}
		m := New(topo, serving, int64(r.Intn(3))*gib, reserve, nil)
		for step := 0; step < 1+r.Intn(6); step++ {
			var held []NodeMemory
			for _, n := range topo.NUMANodes {
				if r.Intn(2) == 0 {
					continue
				}
				nm := NodeMemory{Node: n.ID, Memory: int64(r.Intn(3)) * gib}
				for _, i := range r.Perm(len(sizes))[:r.Intn(3)] {
					nm.HugePages = append(nm.HugePages, Pages{SizeKB: sizes[i], Count: int64(1 + r.Intn(5))})
				}
				slices.SortFunc(nm.HugePages, func(a, b Pages) int { return cmpInt64(a.SizeKB, b.SizeKB) })
				held = append(held, nm)
			}
			if r.Intn(3) == 0 {
				held = nil // gives back: counts fall back to 0
			}
			m.Set(fmt.Sprint("c", r.Intn(3)), held)
			require.Equal(t, m.reportBefore45(), m.Report(), "seed %d step %d", seed, step)
		}
	}
}
