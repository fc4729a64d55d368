package numamem

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNUMAMemoryStatus: the state file's form carries the report's figures
// as they are, pages by the Kubernetes size name, and leaves out capacity
// and free where MemTotal is unknown rather than write -1.
func TestNUMAMemoryStatus(t *testing.T) {
	got := NUMAMemoryStatus([]NodeMemoryReport{
		{Node: 0, Capacity: 4 * gib, Reserved: gib, Held: gib, Free: 2 * gib, HugePages: []PagesReport{{SizeKB: kb2M, Total: 32, Reserved: 4, Held: 16, Free: 12}}},
		{Node: 3, Capacity: -1, Free: -1, Held: gib},
	})
	require.Len(t, got, 2)
	require.NotNil(t, got[0].Memory.Capacity)
	assert.Equal(t, 4*gib, *got[0].Memory.Capacity)
	assert.Equal(t, 2*gib, *got[0].Memory.Free)
	assert.Equal(t, "2Mi", got[0].HugePages[0].Size)
	assert.Equal(t, int64(12), got[0].HugePages[0].Free)
	assert.Equal(t, 3, got[1].Node)
	assert.Nil(t, got[1].Memory.Capacity)
	assert.Nil(t, got[1].Memory.Free)
	assert.Equal(t, gib, got[1].Memory.Held)
	assert.Nil(t, NUMAMemoryStatus(nil))
}
