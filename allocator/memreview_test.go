package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResizeKeepsHugePageNodeInMems: a CPU resize recomputes mems from the
// CPUs, and must keep the nodes the container holds memory of (H2): the
// runtime would otherwise narrow its mems and its next hugepage fault on
// the dropped node fails.
func TestResizeKeepsHugePageNodeInMems(t *testing.T) {
	a := newAllocator(t, "xeon-2s-snc2", `pools: {exclusive: {cpus: "2-39,42-79"}}`)
	req := withMemory("a", 4, 0, Pages{kb1G, 6})
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
