// Package cpulist parses the kernel's list format ("0-3,8,10-11"), which
// sysfs files, the kernel command line, the configuration and annotations
// all use, so that discovery and configuration share one parser without
// depending on each other.
package cpulist

import (
	"fmt"
	"strings"

	"k8s.io/utils/cpuset"
)

// Parse parses a kernel list, tolerating surrounding white space and an
// empty list. Negative ids are refused.
func Parse(s string) (cpuset.CPUSet, error) {
	s = strings.TrimSpace(s)
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.New(), fmt.Errorf("malformed CPU list %q: %w", s, err)
	}
	for _, id := range set.UnsortedList() {
		if id < 0 {
			return cpuset.New(), fmt.Errorf("malformed CPU list %q: negative CPU %d", s, id)
		}
	}
	return set, nil
}

// ParseSpaced parses a list as people write it ("0-3, 8"): the kernel's
// syntax with spaces anywhere. The error does not explain the kernel
// syntax; callers say what to write instead.
func ParseSpaced(s string) (cpuset.CPUSet, error) {
	set, err := Parse(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		return cpuset.New(), fmt.Errorf("malformed CPU list %q", s)
	}
	return set, nil
}
