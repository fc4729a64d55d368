package irq

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

func TestParseMask(t *testing.T) {
	for in, want := range map[string]cpuset.CPUSet{
		"ff":                         cpuset.New(0, 1, 2, 3, 4, 5, 6, 7),
		"f3\n":                       cpuset.New(0, 1, 4, 5, 6, 7),
		"0":                          cpuset.New(),
		"1,00000000":                 cpuset.New(32),
		"ff,fffffff0":                cpuset.New(4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39),
		"00000000,00000000,0000000C": cpuset.New(2, 3),
	} {
		got, err := ParseMask(in)
		require.NoError(t, err, in)
		assert.True(t, got.Equals(want), "%q: got %s, want %s", in, got, want)
	}
	for _, bad := range []string{"", "fg", "1,,2", "123456789", ",f", "f,", "0x3"} {
		_, err := ParseMask(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// TestFormatMaskKeepsTheKernelsLayout: what is written back has exactly
// the width the kernel printed, whatever the set.
func TestFormatMaskKeepsTheKernelsLayout(t *testing.T) {
	for _, tc := range []struct {
		set        cpuset.CPUSet
		like, want string
	}{
		{cpuset.New(0, 1, 4, 5, 6, 7), "ff", "f3"},
		{cpuset.New(), "ff", "00"},
		{cpuset.New(0, 39), "ff,ffffffff", "80,00000001"},
		{cpuset.New(2, 3), "00000000,000000ff", "00000000,0000000c"},
		{cpuset.New(0, 1, 2), "f", "7"},
	} {
		got, err := FormatMask(tc.set, tc.like)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
		back, err := ParseMask(got)
		require.NoError(t, err)
		assert.True(t, back.Equals(tc.set))
	}
	_, err := FormatMask(cpuset.New(8), "ff")
	assert.ErrorContains(t, err, "does not fit")
}
