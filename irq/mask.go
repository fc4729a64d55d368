package irq

import (
	"fmt"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// ParseMask parses the kernel's hexadecimal CPU mask, as in
// /proc/irq/default_smp_affinity and /proc/irq/N/smp_affinity: groups of up
// to 8 hex digits (32 CPUs), most significant first, separated by commas
// ("ff", "ff,ffffffff", "00000000,0000000f"). Bits at or above
// cpulist.MaxCPUs are refused.
func ParseMask(s string) (cpuset.CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return cpuset.New(), fmt.Errorf("empty CPU mask")
	}
	groups := strings.Split(s, ",")
	if len(groups)*32 > cpulist.MaxCPUs+32 {
		return cpuset.New(), fmt.Errorf("CPU mask %s has %d groups; at most %d are accepted", cpulist.Echo(s), len(groups), cpulist.MaxCPUs/32)
	}
	var ids []int
	for i, g := range groups {
		if g == "" || len(g) > 8 {
			return cpuset.New(), fmt.Errorf("malformed CPU mask %s: each comma-separated group has 1 to 8 hex digits", cpulist.Echo(s))
		}
		base := (len(groups) - 1 - i) * 32
		for j := 0; j < len(g); j++ {
			nibble, ok := hexValue(g[len(g)-1-j])
			if !ok {
				return cpuset.New(), fmt.Errorf("malformed CPU mask %s: %q is not a hex digit", cpulist.Echo(s), g[len(g)-1-j])
			}
			for b := 0; b < 4; b++ {
				if nibble&(1<<b) != 0 {
					id := base + 4*j + b
					if id >= cpulist.MaxCPUs {
						return cpuset.New(), fmt.Errorf("CPU mask %s names CPU %d, beyond %d", cpulist.Echo(s), id, cpulist.MaxCPUs-1)
					}
					ids = append(ids, id)
				}
			}
		}
	}
	return cpuset.New(ids...), nil
}

func hexValue(c byte) (int, bool) {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0'), true
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

// FormatMask writes set as a hexadecimal mask with the same digit layout as
// like (a mask the kernel printed): the kernel refuses a mask wider than
// its CPU count rounded up to 32 bits (CRI-O's "mask too wide", PR 6765),
// and one it printed itself always fits. A CPU beyond like's width is an
// error.
func FormatMask(set cpuset.CPUSet, like string) (string, error) {
	groups := strings.Split(strings.TrimSpace(like), ",")
	digits := 0
	for _, g := range groups {
		digits += len(g)
	}
	if digits == 0 {
		return "", fmt.Errorf("no mask layout to follow")
	}
	nibbles := make([]byte, digits) // nibbles[0] is CPUs 0-3
	for _, id := range set.List() {
		if id >= 4*digits {
			return "", fmt.Errorf("CPU %d does not fit a mask of %d CPUs", id, 4*digits)
		}
		nibbles[id/4] |= 1 << (id % 4)
	}
	var b strings.Builder
	pos := digits - 1
	for i, g := range groups {
		if i > 0 {
			b.WriteByte(',')
		}
		for range len(g) {
			b.WriteByte("0123456789abcdef"[nibbles[pos]])
			pos--
		}
	}
	return b.String(), nil
}
