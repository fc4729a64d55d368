package sysfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/cpuset"
)

// An absent CPU that takes its core's group (4: core mate 0, group of
// 0,1) "whatever its list says" still lets that list pull others: its L3
// entry names 2,3 (the other group) and the loose 5. 5 then lands in 0's
// group, although the only entry that places it says it shares a cache
// with 2,3. An entry the core overrides is stale: it must move no other
// CPU (docs/state.md: "a stale entry moves no other CPU").
func TestACoreOverriddenEntryDoesNotPullLooseCPUsIntoTheCoresGroup(t *testing.T) {
	shared := func(c *CPU) cpuset.CPUSet { return c.L3Cache.SharedCPUs }
	l3 := func(id int, list ...int) CPU { return CPU{ID: id, L3Cache: Cache{SharedCPUs: cpuset.New(list...)}} }
	cpus := []CPU{l3(0, 0, 1), l3(1, 0, 1), l3(2, 2, 3), l3(3, 2, 3), l3(4, 2, 3, 4, 5), l3(5, 5)}
	got := map[int]int{}
	groupCaches(cpus, cpuset.New(4, 5), map[int]cpuset.CPUSet{4: cpuset.New(0)}, shared, func(c *CPU, v int) { got[c.ID] = v })
	assert.Equal(t, got[0], got[4], "4 takes its core's group")
	assert.NotEqual(t, got[0], got[5], "5 pulled into 0's group by 4's overridden entry (which names 2,3)")
}

// The core's placement only silences an entry it contradicts: one that
// names present CPUs of the core's group alone still places the loose CPUs
// it names there; one naming no present CPU is overridden as well.
func TestACoreAgreeingEntryStillPlacesLooseCPUs(t *testing.T) {
	shared := func(c *CPU) cpuset.CPUSet { return c.L3Cache.SharedCPUs }
	l3 := func(id int, list ...int) CPU { return CPU{ID: id, L3Cache: Cache{SharedCPUs: cpuset.New(list...)}} }
	place := func(list4 ...int) map[int]int {
		cpus := []CPU{l3(0, 0, 1), l3(1, 0, 1), l3(2, 2, 3), l3(3, 2, 3), l3(4, list4...), l3(5, 5)}
		got := map[int]int{}
		groupCaches(cpus, cpuset.New(4, 5), map[int]cpuset.CPUSet{4: cpuset.New(0)}, shared, func(c *CPU, v int) { got[c.ID] = v })
		return got
	}
	got := place(0, 1, 4, 5)
	assert.Equal(t, got[0], got[4])
	assert.Equal(t, got[0], got[5], "4's entry agrees with its core: 5, which it names, shares that cache")
	got = place(4, 5)
	assert.Equal(t, got[0], got[4])
	assert.NotEqual(t, got[0], got[5], "4's entry names no present CPU, the core overrides it: it moves no other CPU")
}
