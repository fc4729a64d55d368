package sysfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/cpuset"
)

// listGroups is the numbering Discover had before it shared groupCaches
// with WithRemembered, kept here as the reference: one group per distinct
// list the kernel gives, numbered in order of its lowest CPU.
func listGroups(cpus []CPU, shared func(*CPU) cpuset.CPUSet) map[int]int {
	index, got := map[string]int{}, map[int]int{}
	for i := range cpus {
		k := shared(&cpus[i]).String()
		if k == "" {
			continue
		}
		v, ok := index[k]
		if !ok {
			v = len(index)
			index[k] = v
		}
		got[cpus[i].ID] = v
	}
	return got
}

// Lists that do not agree (CPU 0 names 1, 1 names only itself: a
// firmware's or a hand-made tree's) are still the kernel's word for the
// present CPUs: two groups, as Discover always read them, not one joined
// because one of them names the other; WithRemembered numbers the
// present CPUs the same way. (TestDiscoverFixtures holds Discover to the
// same reference on every machine shape of testdata/topologies.)
func TestCacheGroupsOfPresentCPUsFollowTheirListsExactly(t *testing.T) {
	shared := func(c *CPU) cpuset.CPUSet { return c.L3Cache.SharedCPUs }
	cpus := []CPU{
		{ID: 0, L3Cache: Cache{SharedCPUs: cpuset.New(0, 1)}},
		{ID: 1, L3Cache: Cache{SharedCPUs: cpuset.New(1)}},
		{ID: 2, L3Cache: Cache{SharedCPUs: cpuset.New(2, 3)}},
		{ID: 3, L3Cache: Cache{SharedCPUs: cpuset.New(2, 3)}},
		{ID: 4, L3Cache: Cache{SharedCPUs: cpuset.New()}}, // offline: no cache directories
		{ID: 5, L3Cache: Cache{SharedCPUs: cpuset.New(5)}},
	}
	want := map[int]int{0: 0, 1: 1, 2: 2, 3: 2, 5: 3}
	assert.Equal(t, want, listGroups(cpus, shared), "the reference")
	got := map[int]int{}
	groupCaches(cpus, cpuset.New(), nil, shared, func(c *CPU, v int) { got[c.ID] = v })
	assert.Equal(t, want, got)

	// A CPU put back from the record, listing the present 5 and itself,
	// joins 5's group; the present CPUs keep their groups.
	cpus = append(cpus, CPU{ID: 6, L3Cache: Cache{SharedCPUs: cpuset.New(5, 6)}})
	got = map[int]int{}
	groupCaches(cpus, cpuset.New(6), nil, shared, func(c *CPU, v int) { got[c.ID] = v })
	assert.Equal(t, map[int]int{0: 0, 1: 1, 2: 2, 3: 2, 5: 3, 6: 3}, got)
}

// Each absent CPU is placed by its own list, whatever order the CPUs are
// met in: 4 and 5 join the present groups their lists name, and both
// name 6, which names no present CPU: 6 cannot be in both, and sits in
// neither rather than in the first met. 7 names no present CPU but is
// named by 8, of 0's group only: it joins that group (a CPU removed
// earlier lists those removed later). 9 names present CPUs of two groups
// (a stale entry): its own group, and 10, which only 9 names, is not
// pulled anywhere by it.
func TestAbsentCPUsArePlacedByTheirOwnListsNotByOrder(t *testing.T) {
	shared := func(c *CPU) cpuset.CPUSet { return c.L3Cache.SharedCPUs }
	l3 := func(id int, list ...int) CPU { return CPU{ID: id, L3Cache: Cache{SharedCPUs: cpuset.New(list...)}} }
	cpus := []CPU{
		l3(0, 0, 1), l3(1, 0, 1), l3(2, 2, 3), l3(3, 2, 3),
		l3(4, 0, 1, 4, 6), l3(5, 2, 3, 5, 6), l3(6, 6),
		l3(7, 7), l3(8, 0, 7, 8),
		l3(9, 0, 2, 9, 10), l3(10, 10),
	}
	got := map[int]int{}
	groupCaches(cpus, cpuset.New(4, 5, 6, 7, 8, 9, 10), nil, shared, func(c *CPU, v int) { got[c.ID] = v })
	assert.Equal(t, map[int]int{0: 0, 1: 0, 2: 1, 3: 1, 4: 0, 5: 1, 6: 2, 7: 0, 8: 0, 9: 3, 10: 4}, got)
}

// An absent CPU that joined a present core takes that core's group, not
// the one its list names: 4's list names 2's group, its core is 0's. 5's
// core mate 6 is offline (no cache list, no group): 5 is placed by its
// own list.
func TestAnAbsentCPUInAPresentCoreTakesItsCoresGroup(t *testing.T) {
	shared := func(c *CPU) cpuset.CPUSet { return c.L3Cache.SharedCPUs }
	l3 := func(id int, list ...int) CPU { return CPU{ID: id, L3Cache: Cache{SharedCPUs: cpuset.New(list...)}} }
	cpus := []CPU{l3(0, 0, 1), l3(1, 0, 1), l3(2, 2, 3), l3(3, 2, 3), l3(4, 2, 3, 4), l3(5, 2, 3, 5), l3(6)}
	got := map[int]int{}
	mates := map[int]cpuset.CPUSet{4: cpuset.New(0), 5: cpuset.New(6)}
	groupCaches(cpus, cpuset.New(4, 5), mates, shared, func(c *CPU, v int) { got[c.ID] = v })
	assert.Equal(t, map[int]int{0: 0, 1: 0, 2: 1, 3: 1, 4: 0, 5: 1}, got)
}
