package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/numamem"
)

// TestMemoryReportFreeIsWhatTheNextContainerGets: the free figures that
// status and the metrics show are the decision's own: a container asking
// for exactly a node's free pages fits, one more page is refused with the
// same number, and a host process's pages (free_hugepages below what we
// count) are not free.
func TestMemoryReportFreeIsWhatTheNextContainerGets(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", "pools: {exclusive: {cpus: \"1-3\"}}\nmemory: {reservedPerNode: 1Gi, reservedHugePagesPerNode: {2Mi: 4}}")
	_, err := a.Allocate(withMemory("a", 1, 256<<20, numamem.Pages{SizeKB: kb2M, Count: 8}))
	require.NoError(t, err)

	rep := a.MemoryReport()
	require.Len(t, rep, 2)
	n1 := rep[1]
	assert.Equal(t, 4*gib-64<<20, n1.Capacity, "MemTotal less the 32 pages of 2 MiB")
	assert.Equal(t, gib, n1.Reserved)
	assert.Equal(t, int64(256<<20), n1.Held)
	assert.Equal(t, 4*gib-64<<20-gib-256<<20, n1.Free)
	assert.Equal(t, []numamem.PagesReport{{SizeKB: kb2M, Total: 32, Reserved: 4, Held: 8, Free: 20}, {SizeKB: kb1G, Reserved: 0}}, n1.HugePages)

	_, err = a.Allocate(withMemory("b", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 21}))
	require.ErrorContains(t, err, "hugepages-2Mi: asked 21, free node0 0 node1 20", "the refusal names the report's free")
	_, err = a.Allocate(withMemory("c", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 20}))
	require.NoError(t, err, "all the report's free pages fit")
	assert.Equal(t, int64(0), a.MemoryReport()[1].HugePages[0].Free)

	// free_hugepages below what we count: a process we do not know took
	// pages; the report, like the decision, calls only the rest free.
	b := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	r := withMemory("x", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 2})
	r.HugePagesNow = hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, 10}})
	_, err = b.Allocate(r)
	require.NoError(t, err)
	assert.Equal(t, int64(10), b.MemoryReport()[1].HugePages[0].Free, "min(32 − 2 held, 10 free as last read)")
}
