package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/numamem"
)

// TestStoppedContainersPagesAreCountedOnce: a stopped container's
// hugepages stay held for its pod (the hold), and a decision for another
// pod counts them once whether its pages are still faulted in (DPDK keeps
// its hugepage files in the pod's hugetlbfs volume after it exits, until
// its next start or the pod's end: they are missing from free_hugepages)
// or back in free_hugepages (an anonymous MAP_HUGETLB mapping, returned at
// exit), and once the pod's restarted container faulted some of them in
// again. Node 1 has 32 pages; the stopped container held 16. The figure
// checked is what the refusal of 33 pages (more than it has) says node 1 has.
//
// Not covered, because the counts cannot tell it from the second case: a
// hold whose pages went back to free_hugepages while something outside
// the plugin took 16 also reads free 16, and has 0 left, not 16 (see
// docs/placement.md, "What a node has").
func TestStoppedContainersPagesAreCountedOnce(t *testing.T) {
	cases := []struct {
		name    string
		stop    bool  // the container stops (a hold) rather than being released
		restart int64 // free_hugepages when the pod's container runs again; 0: it does not
		free    int64 // free_hugepages of node 1 when the other pod's container is decided
		avail   int64
	}{
		{name: "no hold, outside process took 10", free: 22, avail: 22},
		{name: "hold, its pages still faulted in", stop: true, free: 16, avail: 16},
		{name: "hold, its pages back in free, nothing outside", stop: true, free: 32, avail: 16},
		{name: "its pod's restarted container faulted 10 of them in", stop: true, restart: 32, free: 22, avail: 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
			dpdk := withMemory("dpdk", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16})
			dpdk.HugePagesNow = hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, 32}})
			_, err := a.Allocate(dpdk)
			require.NoError(t, err)
			if c.stop {
				failed := int32(1) // restarting: its CPUs and memory stay its own
				a.Stop("dpdk", &failed)
				require.Len(t, a.Holds(), 1)
			} else {
				a.Release("dpdk")
			}
			if c.restart > 0 {
				again := dpdk
				again.ID = "dpdk-2"
				again.HugePagesNow = hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, c.restart}})
				res, err := a.Allocate(again)
				require.NoError(t, err)
				require.Equal(t, "1", res.Assignment.Mems.String())
				require.Empty(t, a.Holds(), "the new run ends the hold")
			}
			other := withMemory("other", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 33})
			other.HugePagesNow = hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, c.free}})
			_, err = a.Allocate(other)
			require.ErrorContains(t, err, fmt.Sprintf("hugepages-2Mi: asked 33, free node0 0 node1 %d", c.avail))
			checkMemoryAccount(t, a)
		})
	}
}

// TestHoldWhosePagesWereTakenIsRefusedAtItsRestart: what the counts cannot
// see (docs/placement.md): a stopped container's 16 pages went back to
// free_hugepages at its exit, a process outside the plugin took 10 (free
// 22), and a container of another pod is given 16 of node 1, 6 more than
// are left beside the hold. The hold's container, when it runs again,
// decides on the counts it reads then (6 free) and is refused with what
// node 1 has, rather than pinned to a node without its pages.
func TestHoldWhosePagesWereTakenIsRefusedAtItsRestart(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	dpdk := withMemory("dpdk", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16})
	dpdk.HugePagesNow = hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, 32}})
	_, err := a.Allocate(dpdk)
	require.NoError(t, err)
	failed := int32(1)
	a.Stop("dpdk", &failed)

	other := withMemory("other", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16})
	other.HugePagesNow = hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, 22}})
	_, err = a.Allocate(other)
	require.NoError(t, err, "placed on counts that cannot tell a given-back hold from a faulted one")

	again := dpdk
	again.ID = "dpdk-2"
	again.HugePagesNow = hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, 6}}) // the other container faulted its 16 in
	_, err = a.Allocate(again)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 16, free node0 0 node1 6")
	checkMemoryAccount(t, a)
}
