package cpulist

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBelow(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string // "" with err set: an error
		err   string
	}{
		{"", 4, "", ""},
		{" 0-3 ", 4, "0-3", ""},
		{"0-1,1-3,2", 4, "0-3", ""},
		{"3,0", 4, "0,3", ""},
		{"0-3000000", 64, "", "out of range"},
		{"0-9223372036854775807", 64, "", "out of range"},
		{"9223372036854775808", 64, "", "out of range"},
		{"0-18446744073709551616", MaxCPUs, "", "out of range"},
		{"+1", 4, "", "not a number"},
		{"-1", 4, "", "missing number"},
		{"1-+2", 4, "", "not a number"},
		{"0 -3", 4, "", "not a number"},
		{"3-1", 4, "", "reversed"},
		{"0,,1", 4, "", "empty item"},
		{"0,", 4, "", "empty item"},
		{",0", 4, "", "empty item"},
		{"1-2-3", 4, "", "not a number"},
		{"4", 4, "", "out of range"},
		{"0", 0, "", "no ids"},
		{"0x1", 4, "", "not a number"},
		{"٣", 4, "", "not a number"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			set, err := ParseBelow(tc.in, tc.limit)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, set.String())
		})
	}
}

// A hostile list costs time proportional to its text, and its error repeats
// a short prefix only.
func TestParseListHostileIsFastAndShort(t *testing.T) {
	huge := strings.Repeat("0-65535,", 200000) + "0"
	for _, in := range []string{huge, strings.Repeat("9", 1<<20), "0-" + strings.Repeat("9", 1<<20), strings.Repeat("1,", 1<<19) + "x"} {
		start := time.Now()
		_, err := ParseBelow(in, 64)
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 200, "error repeats the whole value")
		assert.Less(t, time.Since(start), 10*time.Second, "hang guard; speed is a benchmark")
	}
	set, err := Parse(huge)
	require.NoError(t, err)
	assert.Equal(t, MaxCPUs, set.Size())
}
