package sysfs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// The daemon remembers the online CPUs at every hotplug check and at each
// Synchronize (rememberCPUs, rememberSynchronized): after CPU 3 is
// hot-removed (or merely taken offline first, as a vCPU unplug does), its
// present sibling 11's entry is rewritten with the kernel's list, which no
// longer names 3. The record is then no stale one, yet put back at the
// next restart CPU 3 must sit in 11's core as it did: the pools are carved
// as before the removal (docs/state.md: "laid out as an offline CPU at
// that place").
func TestAHotRemovedSiblingStaysInItsCoreOnceTheRecordIsRewritten(t *testing.T) {
	root := fixture.Root(t, "desktop-8c16t")
	full, err := sysfs.Discover(root)
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})

	hotRemove(t, root, full, 3)
	now, err := sysfs.Discover(root)
	require.NoError(t, err)
	rec, changed := now.Remember(rec) // what the daemon writes after seeing the removal
	require.True(t, changed, "CPU 11's siblings changed")

	back := now.WithRemembered(rec)
	core := map[int]int{}
	for _, c := range full.CPUs {
		core[c.ID] = c.Core
	}
	for _, c := range back.CPUs {
		if c.ID == 3 || c.ID == 11 {
			assert.Equal(t, core[c.ID], c.Core, "CPU %d: core index %d before the removal, %d after a restart", c.ID, core[c.ID], c.Core)
		}
	}
}

// CPU 64's entry was last remembered while CPU 65, of the same L3, was
// offline: the kernel's list then lacks 65 ("0-7,64,66-71"). That is no
// stale record, only the kernel's view at that moment; once 64 is
// hot-removed and 65 is online again, 64 must still sit in the L3 group of
// CPUs 0-7,65-71, as it did.
func TestAHotRemovedCPUKeepsItsL3WhenItsEntryWasMadeWithASiblingOffline(t *testing.T) {
	now, back := staleRecord(t, func(r *sysfs.RememberedCPU) { r.L3CPUs = "0-7,64,66-71" })
	l3 := map[int]int{}
	for _, c := range back.CPUs {
		l3[c.ID] = c.L3
	}
	_ = now
	assert.Equal(t, l3[0], l3[64], "CPU 64: L3 index %d, CPU 0 (same L3 while present) %d", l3[64], l3[0])
}
