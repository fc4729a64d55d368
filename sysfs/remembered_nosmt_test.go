package sysfs_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// A node without SMT (every core one thread, a common VM shape) and a
// stale entry for an absent CPU whose core id now names a present CPU's
// core (the VM was reshaped: the entry was made with threads=2). Its own
// siblings list names no present CPU (its old sibling is absent too). The present core must keep the one
// thread the kernel gives it (docs/state.md): a width of "at least 2"
// alone would let the stale CPU join every 1-thread core.
func TestStaleRememberedCPUDoesNotJoinAOneThreadCoreOnANodeWithoutSMT(t *testing.T) {
	root := fixture.Root(t, "kubelet-uncore-single-socket-no-smt")
	full, err := sysfs.Discover(root)
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})
	var coreID3 int
	for _, r := range rec.CPUs {
		if r.ID == 3 {
			coreID3 = r.CoreID
		}
	}
	for i := range rec.CPUs {
		if id := rec.CPUs[i].ID; id == 14 || id == 15 {
			rec.CPUs[i].CoreID, rec.CPUs[i].Siblings = coreID3, "14-15" // made while the VM had threads=2
		}
	}
	hotRemove(t, root, full, 15)
	mid, err := sysfs.Discover(root)
	require.NoError(t, err)
	hotRemove(t, root, mid, 14)
	now, err := sysfs.Discover(root)
	require.NoError(t, err)
	back := now.WithRemembered(rec)
	threads := map[int][]int{}
	for _, c := range back.CPUs {
		threads[c.Core] = append(threads[c.Core], c.ID)
	}
	for core, ids := range threads {
		assert.Len(t, ids, 1, "core index %d has threads %v on a node whose every core has one", core, ids)
	}
}
