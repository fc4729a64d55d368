package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// TestResizeKeepsHugePageNodeInMems: a CPU resize recomputes mems from the
// CPUs, and must keep the nodes the container holds memory of (H2): the
// runtime would otherwise narrow its mems and its next hugepage fault on
// the dropped node fails.
func TestResizeKeepsHugePageNodeInMems(t *testing.T) {
	a := newAllocator(t, "xeon-2s-snc2", `pools: {exclusive: {cpus: "2-39,42-79"}}`)
	req := withMemory("a", 4, 0, numamem.Pages{SizeKB: kb1G, Count: 6})
	req.HugePagesNow = hugeNow(kb1G, map[int][2]int64{0: {0, 0}, 1: {4, 4}, 2: {0, 0}, 3: {4, 4}})
	res, err := a.Allocate(req)
	require.NoError(t, err)
	require.Equal(t, "1,3", res.Assignment.Mems.String())

	res, err = a.Resize(resize("a", 5))
	require.NoError(t, err)
	assert.Equal(t, "1,3", res.Assignment.Mems.String(), "grown: it still holds pages on node 3")
	res, err = a.Resize(resize("a", 4))
	require.NoError(t, err)
	assert.Equal(t, "1,3", res.Assignment.Mems.String(), "shrunk: it still holds pages on node 3")
	checkMemoryAccount(t, a)
}

// TestMemoryOfRunningContainer: at a restart, a running container's
// touched hugepages are no longer free, and must not be taken for gone
// (M1): its demand is counted on the nodes of its mems, whatever
// free_hugepages says, the last node taking what the others lack.
func TestMemoryOfRunningContainer(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	// The container faulted in all of node 1's 32 pages before the restart.
	a.mem.KeepPages(1, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 0}})
	d := numamem.Demand{HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 32}}}
	as := Assignment{ID: "a", Pool: pools.Exclusive, CPUs: set(t, "2"), Mems: set(t, "1")}
	assert.Equal(t, []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 32}}}}, a.MemoryOf(as, d))

	// Mems over both nodes, node 0 without pages: node 1 has them.
	as.Mems = set(t, "0-1")
	assert.Equal(t, []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 32}}}}, a.MemoryOf(as, d))

	// Over-committed (a record of an older version that counted nothing):
	// the last node takes the rest, so that the count adds up.
	a.mem.Set("other", []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 20}}}})
	as.Mems = set(t, "1")
	assert.Equal(t, []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 32}}}}, a.MemoryOf(as, d))
}

// TestAdoptCountsMemoryWhereTheRuntimeRunsIt: a container created while
// the plugin was away (a kill -9 before the state write) runs with the
// mems the runtime gave it, which may reach beyond its CPUs' nodes (M2):
// its hugepages are counted on those nodes, and its mems recorded as it
// runs.
func TestAdoptCountsMemoryWhereTheRuntimeRunsIt(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	req := withMemory("a", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 32})
	require.Equal(t, "0", a.x.numaNodesOf(set(t, "1")).String())
	res, how, err := a.Adopt(req, set(t, "1"), set(t, "0-1"))
	require.NoError(t, err)
	require.Equal(t, StaysWhereItRuns, how)
	assert.Equal(t, "0-1", res.Assignment.Mems.String(), "as it runs")
	assert.Equal(t, []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 32}}}}, res.Assignment.Memory)
	_, err = a.Allocate(withMemory("b", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 1}))
	require.ErrorContains(t, err, "free node0 0 node1 0", "its pages are counted")
	checkMemoryAccount(t, a)

	// Mems the runtime did not pin (or names no node of ours): its CPUs'.
	a = newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	res, how, err = a.Adopt(exclusive("c", 1), set(t, "1"), set(t, "7"))
	require.NoError(t, err)
	require.Equal(t, StaysWhereItRuns, how)
	assert.Equal(t, "0", res.Assignment.Mems.String())
}

// TestHoldKeepsMemoryUnlessItGoesWithItsCPUs: a completed container's
// memory goes to the pod's next container that takes it with its CPUs
// (L1), not to any new container of the pod: a sidecar on a shared pool,
// a container that asks for no memory, or one whose CPUs and memory are
// elsewhere leave the hold its memory. The account never counts a page
// beyond what a node has: a container whose memory may have come from the
// hold's (on its nodes) takes it.
func TestHoldKeepsMemoryUnlessItGoesWithItsCPUs(t *testing.T) {
	held := []numamem.NodeMemoryUse{{Node: 1, HugePages: map[int64]int64{kb2M: 16}}}
	setup := func(t *testing.T) (*Allocator, Request) {
		a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
		init := withMemory("init", 2, 0, numamem.Pages{SizeKB: kb2M, Count: 16})
		res, err := a.Allocate(init)
		require.NoError(t, err)
		require.Equal(t, "1", res.Assignment.Mems.String())
		ok := int32(0)
		a.Stop("init", &ok)
		require.Equal(t, held, a.MemoryUse())
		return a, init
	}
	of := func(init Request, r Request, name string) Request {
		r.Pod, r.Container = init.Pod, name
		return r
	}

	t.Run("a sidecar on infra", func(t *testing.T) {
		a, init := setup(t)
		side := of(init, withMemory("side", 0, 0, numamem.Pages{SizeKB: kb2M, Count: 16}), "side")
		side.Pool = pools.Infra
		_, err := a.Allocate(side)
		require.NoError(t, err)
		assert.Equal(t, held, a.MemoryUse())
		checkMemoryAccount(t, a)
	})
	t.Run("CPUs and memory elsewhere", func(t *testing.T) {
		a, init := setup(t)
		r := of(init, withMemory("other", 1, gib), "other")
		r.NUMANodes = set(t, "0")
		res, err := a.Allocate(r)
		require.NoError(t, err)
		require.Equal(t, "0", res.Assignment.Mems.String())
		assert.Equal(t, []numamem.NodeMemoryUse{{Node: 0, Memory: gib, HugePages: map[int64]int64{}}, held[0]}, a.MemoryUse())
		checkMemoryAccount(t, a)
	})
	t.Run("no memory asked", func(t *testing.T) {
		a, init := setup(t)
		_, err := a.Allocate(of(init, exclusive("plain", 1), "plain"))
		require.NoError(t, err)
		assert.Contains(t, a.MemoryUse(), held[0])
		checkMemoryAccount(t, a)
	})
	t.Run("its CPUs with memory: the pages go with them", func(t *testing.T) {
		a, init := setup(t)
		res, err := a.Allocate(of(init, withMemory("app", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 32}), "app"))
		require.NoError(t, err)
		assert.Equal(t, "1", a.x.numaNodesOf(res.Assignment.CPUs).String())
		assert.Equal(t, []numamem.NodeMemoryUse{{Node: 1, HugePages: map[int64]int64{kb2M: 32}}}, a.MemoryUse())
		checkMemoryAccount(t, a)
	})
	t.Run("other CPUs, the hold's pages", func(t *testing.T) {
		// Its CPUs elsewhere, its memory on the hold's node, where the
		// decision counted the hold's memory as its own (lentMemory).
		a, init := setup(t)
		r := of(init, withMemory("app", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 32}), "app")
		a.takeFromHolds(r, set(t, "1"), []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 32}}}})
		assert.Empty(t, a.MemoryUse(), "the hold's memory went to it")
	})
}

// TestOlderHugePageReadingIsNotKept: two creations read the hugepage
// counts before the lock; the one that read first may decide second. Its
// older reading must not replace the newer one (L4): the newer counts
// stay, and its decision uses them.
func TestOlderHugePageReadingIsNotKept(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	reading := func(seq uint64, free int64) map[int][]sysfs.HugePages {
		now := hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, free}})
		for _, hp := range now {
			hp[0].Seq = seq
		}
		return now
	}
	newer := withMemory("newer", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 1})
	newer.HugePagesNow = reading(2, 4) // a host process took 28 pages
	_, err := a.Allocate(newer)
	require.NoError(t, err)

	older := withMemory("older", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 8})
	older.HugePagesNow = reading(1, 32) // read before the host process took them
	_, err = a.Allocate(older)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 8, free node0 0 node1 4", "decided on the newer reading")
	assert.Equal(t, int64(4), a.mem.PagesOf(1)[0].Free, "the newer reading stays")
}

// TestMemoryShortageDecidedWithoutSearch: on the 8-node machine, a memory
// limit or hugepages no set of nodes holds is found short once, over all
// the candidate nodes, not after weighing every combination of them (M3):
// such a decision costs about what one without memory does.
func TestMemoryShortageDecidedWithoutSearch(t *testing.T) {
	a := newAllocator(t, largeNode, `isolatedCPUs: "1-191,193-383"`)
	i := 0
	allocs := func(d numamem.Demand, refused bool) float64 {
		return testing.AllocsPerRun(20, func() {
			i++
			r := exclusive(fmt.Sprintf("x%d", i), 4)
			r.Demand = d
			_, err := a.Allocate(r)
			require.Equal(t, refused, err != nil, "%v", err)
			a.Release(r.ID)
		})
	}
	none := allocs(numamem.Demand{}, false)
	assert.Less(t, allocs(numamem.Demand{Memory: 1 << 40}, false), none+100, "a memory limit no node holds")
	assert.Less(t, allocs(numamem.Demand{HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 1}}}, true), none+100, "hugepages no node has")
}

// TestReadingOfSomeSizes: the plugin reads only the sizes a container asks
// for; the other sizes keep the counts last read, and each size keeps the
// newer of two readings.
func TestReadingOfSomeSizes(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	a.mem.KeepPages(1, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 8, Seq: 5}})
	assert.Equal(t, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 8, Seq: 5}, {SizeKB: 1048576}}, a.mem.PagesOf(1))
	a.mem.KeepPages(1, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 32, Seq: 4}, {SizeKB: 1048576, Total: 2, Free: 2, Seq: 4}})
	assert.Equal(t, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 8, Seq: 5}, {SizeKB: 1048576, Total: 2, Free: 2, Seq: 4}}, a.mem.PagesOf(1))
	assert.Equal(t, []sysfs.HugePages{{SizeKB: kb2M}, {SizeKB: 1048576}}, a.x.topo.NUMANodes[0].HugePages, "discovery's counts are not written through")
	assert.Equal(t, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 32}, {SizeKB: 1048576}}, a.x.topo.NUMANodes[1].HugePages)
}

// TestAdoptPlacesARunningContainerWithoutTheFreeFloor: a running container
// Synchronize places anew (it runs unpinned, or not on the CPUs the
// kubelet allocated it) has faulted its hugepages in: they are missing
// from free_hugepages because they are its own (issue 41, item 7). The
// decision must not take the free count as a floor, as MemoryOf does not
// for one that stays where it runs; it is refused only when the pages
// the others hold leave too few.
func TestAdoptPlacesARunningContainerWithoutTheFreeFloor(t *testing.T) {
	setup := func(t *testing.T) *Allocator {
		a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
		// b and the container adopted below faulted in all 32 pages.
		a.mem.KeepPages(1, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 0}})
		_, how, err := a.Adopt(withMemory("b", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16}), set(t, "2"), set(t, "1"))
		require.NoError(t, err)
		require.Equal(t, StaysWhereItRuns, how)
		return a
	}
	t.Run("unpinned", func(t *testing.T) {
		a := setup(t)
		res, how, err := a.Adopt(withMemory("c", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16}), set(t, ""), set(t, ""))
		require.NoError(t, err, "its own pages are not free, but they are its own")
		assert.Equal(t, PlacedAsNew, how)
		assert.Equal(t, "3", res.Assignment.CPUs.String())
		assert.Equal(t, "1", res.Assignment.Mems.String())
		assert.Equal(t, []numamem.NodeMemoryUse{{Node: 1, HugePages: map[int64]int64{kb2M: 32}}}, a.MemoryUse())
		checkMemoryAccount(t, a)

		// A third one does not fit what the others hold: refused.
		_, _, err = a.Adopt(withMemory("d", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 1}), set(t, ""), set(t, ""))
		require.ErrorContains(t, err, "hugepages-2Mi: asked 1, free node0 0 node1 0")
	})
	t.Run("the kubelet's CPUs", func(t *testing.T) {
		a := setup(t)
		req := withMemory("c", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16})
		req.CPUs = set(t, "3")
		res, how, err := a.Adopt(req, set(t, ""), set(t, ""))
		require.NoError(t, err)
		assert.Equal(t, PlacedAsNew, how)
		assert.Equal(t, "1", res.Assignment.Mems.String())
		checkMemoryAccount(t, a)
	})
	t.Run("a creation keeps the floor", func(t *testing.T) {
		a := setup(t)
		a.mem.KeepPages(1, []sysfs.HugePages{{SizeKB: kb2M, Total: 32, Free: 8}}) // a host process took 8
		_, err := a.Allocate(withMemory("c", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16}))
		require.ErrorContains(t, err, "hugepages-2Mi: asked 16, free node0 0 node1 8")
	})
}

// TestResizeNeverNarrowsTheMemsItRunsWith: a CPU resize widens a running
// container's mems to the nodes of the CPUs it adds, and never narrows
// them: narrowing cpuset.mems migrates the pages the container has on the
// nodes it loses (cgroup v2 always, v1 with memory_migrate), and a running
// container's memory is not ours to move. A container Synchronize kept
// with the mems the runtime runs it with (wider than its CPUs' nodes)
// keeps them through a grow and a shrink; so does one whose grow reached
// another node, when it shrinks back.
func TestResizeNeverNarrowsTheMemsItRunsWith(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	res, how, err := a.Adopt(exclusive("a", 2), set(t, "2,42"), set(t, "0-1"))
	require.NoError(t, err)
	require.Equal(t, StaysWhereItRuns, how)
	require.Equal(t, "0-1", res.Assignment.Mems.String(), "as the runtime runs it")
	res, err = a.Resize(resize("a", 4))
	require.NoError(t, err)
	assert.Equal(t, "0-1", res.Assignment.Mems.String(), "grown on node 0: its mems stay")
	res, err = a.Resize(resize("a", 2))
	require.NoError(t, err)
	assert.Equal(t, "0-1", res.Assignment.Mems.String(), "shrunk: its mems stay")

	// Node 0's other exclusive CPUs are taken: b grows onto node 1.
	b := newAllocator(t, "xeon-2s-interleaved", `pools: {exclusive: {cpus: "2,4,42,44,3,43"}}`)
	onNode0 := func(id string) Request {
		r := exclusive(id, 2)
		r.NUMANodes = set(t, "0")
		return r
	}
	res, err = b.Allocate(onNode0("b"))
	require.NoError(t, err)
	require.Equal(t, "0", res.Assignment.Mems.String())
	_, err = b.Allocate(onNode0("other"))
	require.NoError(t, err)
	res, err = b.Resize(resize("b", 4))
	require.NoError(t, err)
	require.Equal(t, "0-1", res.Assignment.Mems.String(), "widened to the node of the CPUs it added")
	res, err = b.Resize(resize("b", 2))
	require.NoError(t, err)
	assert.Equal(t, 1, b.x.numaNodesOf(res.Assignment.CPUs).Size(), "its CPUs are back on one node")
	assert.Equal(t, "0-1", res.Assignment.Mems.String(), "its pages on node 1 are not moved")
}
