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
	groupCaches(cpus, cpuset.New(), shared, func(c *CPU, v int) { got[c.ID] = v })
	assert.Equal(t, want, got)

	// A CPU put back from the record, listing the present 5 and itself,
	// joins 5's group; the present CPUs keep their groups.
	cpus = append(cpus, CPU{ID: 6, L3Cache: Cache{SharedCPUs: cpuset.New(5, 6)}})
	got = map[int]int{}
	groupCaches(cpus, cpuset.New(6), shared, func(c *CPU, v int) { got[c.ID] = v })
	assert.Equal(t, map[int]int{0: 0, 1: 1, 2: 2, 3: 2, 5: 3, 6: 3}, got)
}
