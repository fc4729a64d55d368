package sysfs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// staleRecord: epyc-1s-nps4 with CPU 64 (sibling of CPU 0, L3 0-7,64-71)
// hot-removed; the record's entry for 64 is edited by mutate (a record
// from before a BIOS change / another machine shape / hand-edited).
func staleRecord(t *testing.T, mutate func(*sysfs.RememberedCPU)) (now, back *sysfs.Topology) {
	t.Helper()
	root := fixture.Root(t, "epyc-1s-nps4")
	full, err := sysfs.Discover(root)
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})
	for i := range rec.CPUs {
		if rec.CPUs[i].ID == 64 {
			mutate(&rec.CPUs[i])
		}
	}
	hotRemove(t, root, full, 64)
	now, err = sysfs.Discover(root)
	require.NoError(t, err)
	return now, now.WithRemembered(rec)
}

// The present CPUs' cache groups are what sysfs says: a remembered
// absent CPU's stale L3 list must not merge two L3 groups of present CPUs.
func TestStaleRememberedCacheListDoesNotRegroupPresentCPUs(t *testing.T) {
	now, back := staleRecord(t, func(r *sysfs.RememberedCPU) { r.L3CPUs = "0-15,64-79" })
	byID := map[int]sysfs.CPU{}
	for _, c := range back.CPUs {
		byID[c.ID] = c
	}
	for _, c := range now.CPUs {
		assert.Equal(t, c.L3, byID[c.ID].L3, "present CPU %d: L3 index %d in sysfs, %d after the record", c.ID, c.L3, byID[c.ID].L3)
	}
}

// A stale core id puts the absent CPU in another present core: that core
// then has three threads on an SMT-2 node.
func TestStaleRememberedCoreDoesNotJoinAnotherPresentCore(t *testing.T) {
	_, back := staleRecord(t, func(r *sysfs.RememberedCPU) { r.CoreID = 8; r.Siblings = "8,64,72" })
	threads := map[int]int{}
	for _, c := range back.CPUs {
		threads[c.Core]++
	}
	for core, n := range threads {
		assert.LessOrEqual(t, n, 2, "core index %d has %d threads on an SMT-2 node", core, n)
	}
}

// Two absent CPUs of two L3 groups: 64's entry is stale and also names 72
// (absent too), 72's is right. 64 joins group 0-7,65-71 (the present CPUs
// its entry lists are all there), 72 joins 8-15,73-79; the
// absent-to-absent join of 64 and 72 must not then merge the two present
// groups: the present CPUs' cache groups are the kernel's, and each absent
// CPU sits in the one its own entry names.
func TestTwoAbsentCPUsDoNotBridgeTwoPresentL3Groups(t *testing.T) {
	root := fixture.Root(t, "epyc-1s-nps4")
	full, err := sysfs.Discover(root)
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})
	for i := range rec.CPUs {
		if rec.CPUs[i].ID == 64 {
			rec.CPUs[i].L3CPUs = "0-7,64-72"
		}
	}
	hotRemove(t, root, full, 64)
	mid, err := sysfs.Discover(root)
	require.NoError(t, err)
	hotRemove(t, root, mid, 72)
	now, err := sysfs.Discover(root)
	require.NoError(t, err)
	back := now.WithRemembered(rec)
	l3 := map[int]int{}
	for _, c := range back.CPUs {
		l3[c.ID] = c.L3
	}
	before := map[int]int{}
	for _, c := range now.CPUs {
		before[c.ID] = c.L3
	}
	require.NotEqual(t, before[0], before[8], "two L3 groups in sysfs")
	assert.NotEqual(t, l3[0], l3[8], "present CPUs 0 and 8 (two L3 groups in sysfs) share L3 index %d after the record", l3[0])
	assert.Equal(t, l3[0], l3[64], "CPU 64: L3 index %d, CPU 0 (the group its entry names) %d", l3[64], l3[0])
	assert.Equal(t, l3[8], l3[72], "CPU 72: L3 index %d, CPU 8 (the group its entry names) %d", l3[72], l3[8])
}

// removed64And72 is epyc-1s-nps4 (L3 groups 0-7,64-71 and 8-15,72-79; 64
// is 0's sibling, 72 is 8's) with CPUs 64 and 72 hot-removed, and the
// record of the full node with 64's entry changed by edit.
func removed64And72(t *testing.T, edit func(*sysfs.RememberedCPU)) map[int]sysfs.CPU {
	t.Helper()
	root := fixture.Root(t, "epyc-1s-nps4")
	full, err := sysfs.Discover(root)
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})
	for i := range rec.CPUs {
		if rec.CPUs[i].ID == 64 {
			edit(&rec.CPUs[i])
		}
	}
	hotRemove(t, root, full, 64)
	mid, err := sysfs.Discover(root)
	require.NoError(t, err)
	hotRemove(t, root, mid, 72)
	now, err := sysfs.Discover(root)
	require.NoError(t, err)
	back := now.WithRemembered(rec)
	require.True(t, back.Absent.Contains(64) && back.Absent.Contains(72))
	got := map[int]sysfs.CPU{}
	for _, c := range back.CPUs {
		got[c.ID] = c
	}
	require.NotEqual(t, got[0].L3, got[8].L3)
	return got
}

// docs/state.md: a removed CPU joins a present cache group "when the
// present CPUs its entry lists are all in that group ...; else (a stale
// entry) it gets one of its own". 64's entry names present CPUs of two
// L3 groups (0-7 and 8-15): it must be in neither. It landed in 8's
// group anyway, through the absent 72 its entry also names (72 does not
// name 64): the refused present join was made by the absent-to-absent
// pass. Its siblings entry is stale too, naming no present thread: in
// 0's core it would take 0's cache groups, whatever its cache entry says.
func TestAbsentCPUNamingTwoPresentL3GroupsJoinsNeither(t *testing.T) {
	got := removed64And72(t, func(r *sysfs.RememberedCPU) { r.L3CPUs = "0-15,64,72"; r.Siblings = "64" })
	require.NotEqual(t, got[0].Core, got[64].Core, "64's siblings entry names no present thread: a core of its own")
	assert.NotEqual(t, got[0].L3, got[64].L3, "64 in 0's L3 group")
	assert.NotEqual(t, got[8].L3, got[64].L3, "64 (whose entry names present CPUs of two L3 groups) in 8's L3 group %d", got[8].L3)
}

// A removed thread whose siblings entry is right ("0,64": it joins 0's
// core) but whose cache entries are stale (naming only itself) sits in
// the cache groups of its core: a core lies in one group of each cache,
// as Discover reads every node, and a core split over two L3 groups moved
// present CPUs between pools when they were carved.
func TestARemovedThreadInAPresentCoreTakesThatCoresCacheGroups(t *testing.T) {
	now, back := staleRecord(t, func(r *sysfs.RememberedCPU) { r.L3CPUs = "64"; r.L2CPUs = "64" })
	byID := map[int]sysfs.CPU{}
	for _, c := range back.CPUs {
		byID[c.ID] = c
	}
	require.Equal(t, byID[0].Core, byID[64].Core, "64 joins 0's core")
	assert.Equal(t, byID[0].L3, byID[64].L3, "CPU 64: L3 index")
	assert.Equal(t, byID[0].L2, byID[64].L2, "CPU 64: L2 index")
	for _, c := range now.CPUs {
		assert.Equal(t, c.L3, byID[c.ID].L3, "present CPU %d: L3 index", c.ID)
		assert.Equal(t, c.L2, byID[c.ID].L2, "present CPU %d: L2 index", c.ID)
	}
}
