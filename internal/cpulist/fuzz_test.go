package cpulist

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// FuzzParse: any text parses in bounded time to ids below the limit, or to
// a short error; what parses prints back to the same set, and is the set
// that the kernel's definition, expanded id by id, gives.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-3,8,10-11", "", " 2-5\n", "0-3000000", "0-9223372036854775807", "+1", "3-1", "0,,1", "0-65535", "1-2-3",
		"0-7:2/4", "1,2,10-20,100-2000:2/25", "0-63:1/2,1-63:3/7", "0-65535:1/2", "0-9:3/4", "0-7:0/4", "0-7:5/4", "3:1/2", "0-7:2/0", "0-7:2/4294967296"} {
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
			if limit <= 64 {
				if want := expand(t, s); !want.Equals(set) {
					t.Fatalf("%q below %d gave %s, want %s", s, limit, set, want)
				}
			}
		}
		if _, err := ParseSpaced(s); err != nil && len(err.Error()) > 300 {
			t.Fatalf("error of %d bytes repeats the input", len(err.Error()))
		}
	})
}

// expand is the kernel's definition of a list that parsed, id by id
// (lib/bitmap-str.c: for each group start, set min(used, left) ids).
func expand(t *testing.T, s string) cpuset.CPUSet {
	var ids []int
	number := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%q parsed but holds %v", s, err)
		}
		return v
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return cpuset.New()
	}
	for _, item := range strings.Split(s, ",") {
		rng, pattern, strided := strings.Cut(item, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		first := number(lo)
		last := first
		if isRange {
			last = number(hi)
		}
		used, group := last-first+1, last-first+1
		if strided {
			u, g, _ := strings.Cut(pattern, "/")
			used, group = number(u), number(g)
		}
		for start := first; start <= last; start += group {
			for id := start; id < start+used && id <= last; id++ {
				ids = append(ids, id)
			}
		}
	}
	return cpuset.New(ids...)
}
