package state

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemoryRecordRoundTrip: what MemoryRecord writes, ParseMemory reads
// back as it was, with the page sizes in ascending order.
func TestMemoryRecordRoundTrip(t *testing.T) {
	rec := NewMemoryRecord(2)
	rec.Node(1)
	rec.Memory(1 << 30)
	rec.HugePages(2048, 16)
	rec.Node(3)
	rec.HugePages(1048576, 2)
	rec.HugePages(2048, 4)
	assert.Equal(t, "1:memory=1073741824,2048kB=16;3:1048576kB=2,2048kB=4", rec.String())

	held, err := ParseMemory(rec.String())
	require.NoError(t, err)
	assert.Equal(t, []HeldMemory{
		{Node: 1, Memory: 1 << 30, HugePages: []HeldPages{{SizeKB: 2048, Count: 16}}},
		{Node: 3, HugePages: []HeldPages{{SizeKB: 2048, Count: 4}, {SizeKB: 1048576, Count: 2}}},
	}, held)

	held, err = ParseMemory("")
	assert.NoError(t, err)
	assert.Nil(t, held)
}

// TestParseMemoryRefusesMalformedRecords: a damaged record is an error
// that names its part, never holdings made up from it.
func TestParseMemoryRefusesMalformedRecords(t *testing.T) {
	for record, want := range map[string]string{
		"x:memory=1":                       `memory record "x:memory=1": bad node`,
		"-1:memory=1":                      "bad node",
		"70000:memory=1":                   "bad node",
		"0":                                "bad node",
		"0:memory=-1":                      "bad amount",
		"0:memory=2251799813685249":        "bad amount",
		"0:memory":                         "bad amount",
		"0:2048=1":                         "bad page size",
		"0:0kB=1":                          "bad page size",
		strings.Repeat("0:memory=1;", 400): "memory record of 4400 bytes",
	} {
		_, err := ParseMemory(record)
		require.Error(t, err, record)
		assert.Contains(t, err.Error(), want, record)
	}
}
