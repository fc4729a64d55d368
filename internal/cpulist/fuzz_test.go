package cpulist

import (
	"testing"
)

// FuzzParse: any text parses in bounded time to ids below the limit, or to
// a short error; what parses prints back to the same set.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-3,8,10-11", "", " 2-5\n", "0-3000000", "0-9223372036854775807", "+1", "3-1", "0,,1", "0-65535", "1-2-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, limit := range []int{1, 64, MaxCPUs} {
			set, err := ParseBelow(s, limit)
			if err != nil {
				if len(err.Error()) > 300 {
					t.Fatalf("error of %d bytes repeats the input", len(err.Error()))
				}
				continue
			}
			if set.Size() > 0 && set.List()[set.Size()-1] >= limit {
				t.Fatalf("%q below %d gave %s", s, limit, set)
			}
			back, err := ParseBelow(set.String(), limit)
			if err != nil || !back.Equals(set) {
				t.Fatalf("%q: %s does not parse back (%v)", s, set, err)
			}
		}
		if _, err := ParseSpaced(s); err != nil && len(err.Error()) > 300 {
			t.Fatalf("error of %d bytes repeats the input", len(err.Error()))
		}
	})
}
