package cpulist

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestSparseListsAtAndAbove1024 round-trips the lists of a node with ids up
// to 4,095 (issue 33) through the parser and the kernel's format: no id at
// a 1024 boundary, a 32-bit group boundary or the top is lost or merged.
func TestSparseListsAtAndAbove1024(t *testing.T) {
	for _, list := range []string{
		"0-47,1024-1029,1031-1055,2032-2049,2051-2095,3072-3077,3079-3103,4080-4094",
		"1023-1024",
		"1023,1025,4095",
		"0,1024,2048,3072,4095",
		"4095",
		"0-4095",
	} {
		set, err := Parse(list)
		require.NoError(t, err, list)
		assert.Equal(t, list, set.String(), "the kernel's format, unchanged")
		spaced, err := ParseSpaced(list)
		require.NoError(t, err)
		assert.True(t, Equal(set, spaced))
	}
	set, err := ParseBelow("1024-1029,4094", 4096)
	require.NoError(t, err)
	assert.Equal(t, cpuset.New(1024, 1025, 1026, 1027, 1028, 1029, 4094), set)
	_, err = ParseBelow("4096", 4096)
	assert.Error(t, err, "the limit is the node's, not 1024")
}
