package sysfs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// A whole L3 group hot-removed (epyc-1s-nps4's 8-15,72-79, one CPU at a
// time, the record remembered again after each as the daemon does): its
// CPUs share no present CPU, only their entries listing each other, and
// must come back as one L3 group with every CPU's L3 index as Discover
// gave it on the full node. Without the absent CPUs' joins each is a
// group of its own and every later group is renumbered; no other test
// notices that.
func TestWholeL3GroupHotRemovedComesBackAsOneGroup(t *testing.T) {
	root := fixture.Root(t, "epyc-1s-nps4")
	full, err := sysfs.Discover(root)
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})
	now := full
	for _, cpu := range []int{8, 9, 10, 11, 12, 13, 14, 15, 72, 73, 74, 75, 76, 77, 78, 79} {
		hotRemove(t, root, now, cpu)
		now, err = sysfs.Discover(root)
		require.NoError(t, err)
		rec, _ = now.Remember(rec)
	}
	back := now.WithRemembered(rec)
	for _, c := range full.CPUs {
		b, ok := back.CPU(c.ID)
		require.True(t, ok, "CPU %d put back", c.ID)
		assert.Equal(t, c.L3, b.L3, "CPU %d: L3 index", c.ID)
		assert.Equal(t, c.L2, b.L2, "CPU %d: L2 index", c.ID)
	}
}
