package cpulist

import (
	"fmt"
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
		// Strides, as in the kernel's admin guide ("cpu lists").
		{"0-7:2/4", 8, "0-1,4-5", ""},
		{"1,2,10-20,100-2000:2/25", 2048, "1-2,10-20,100-101,125-126,150-151,175-176,200-201,225-226,250-251,275-276,300-301,325-326,350-351,375-376,400-401,425-426,450-451,475-476,500-501,525-526,550-551,575-576,600-601,625-626,650-651,675-676,700-701,725-726,750-751,775-776,800-801,825-826,850-851,875-876,900-901,925-926,950-951,975-976,1000-1001,1025-1026,1050-1051,1075-1076,1100-1101,1125-1126,1150-1151,1175-1176,1200-1201,1225-1226,1250-1251,1275-1276,1300-1301,1325-1326,1350-1351,1375-1376,1400-1401,1425-1426,1450-1451,1475-1476,1500-1501,1525-1526,1550-1551,1575-1576,1600-1601,1625-1626,1650-1651,1675-1676,1700-1701,1725-1726,1750-1751,1775-1776,1800-1801,1825-1826,1850-1851,1875-1876,1900-1901,1925-1926,1950-1951,1975-1976,2000", ""},
		{"0-1023:2/256", 1024, "0-1,256-257,512-513,768-769", ""},
		{"0-9:3/4", 10, "0-2,4-6,8-9", ""},    // the last group cut by the range's end
		{"2-5:1/100", 8, "2", ""},             // one group
		{"0-7:4/4", 8, "0-7", ""},             // every id
		{"0-7:0/4", 8, "", ""},                // no id, as in the kernel
		{"4-7:1/2,0-3:1/2", 8, "0,2,4,6", ""}, // out of order
		{"0-7:1/2,1-7:1/2", 8, "0-7", ""},     // overlapping
		{"0-7:2/4294967295", 8, "0-1", ""},    // the largest group size
		{"0-7:2/4294967296", 8, "", "out of range"},
		{"0-7:2/0", 8, "", "groups of 0"},
		{"0-7:0/0", 8, "", "groups of 0"},
		{"0-7:5/4", 8, "", "more ids than a group"},
		{"3:1/2", 8, "", "after a single id"},
		{"0-7:2", 8, "", "not <used>/<group>"},
		{"0-7:2/", 8, "", "missing number"},
		{"0-7:/4", 8, "", "missing number"},
		{"0-7:+2/4", 8, "", "not a number"},
		{"0-7:2/4/8", 8, "", "not a number"},
		{"0-7:2/4:1/2", 8, "", "not a number"},
		{"0-8:2/4", 8, "", "out of range"},
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
		assert.Less(t, len(err.Error()), 4*maxEcho+100, "error repeats the whole value") // a value and an item of it, each echoed
		assert.Less(t, time.Since(start), 10*time.Second, "hang guard; speed is a benchmark")
	}
	set, err := Parse(huge)
	require.NoError(t, err)
	assert.Equal(t, MaxCPUs, set.Size())
}

// Strides are never expanded group by group without bound: many strided
// ranges of tiny groups, each of a different size or start, cost a pass
// per distinct small group size, not a pass per range.
func TestParseStridesHostileIsBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "%d-65535:1/%d,", i%65535, 2+i%300)
	}
	b.WriteString("0")
	start := time.Now()
	set, err := Parse(b.String())
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "hang guard; speed is a benchmark")
	assert.Equal(t, MaxCPUs, set.Size(), "0-65535:1/2 and 1-65535:1/2 cover every id")
}

// BenchmarkParseStridesHostile: a megabyte of strided ranges, the worst
// shape for the stride trains (a distinct small group size per range).
func BenchmarkParseStridesHostile(b *testing.B) {
	var s strings.Builder
	for i := 0; s.Len() < 1<<20; i++ {
		fmt.Fprintf(&s, "%d-65535:1/%d,", i%65535, 2+i%300)
	}
	s.WriteString("0")
	b.ResetTimer()
	for b.Loop() {
		if _, err := Parse(s.String()); err != nil {
			b.Fatal(err)
		}
	}
}
