package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A container pinned back on its record at a restart keeps the record's
// offline CPUs, held for it (cgroup v1 dropped them from its cpuset; that
// is no reason to move it), unless none of its CPUs is online; and the
// CPUs of a record it no longer runs on read as given away by a live
// shrink only when none is offline and another has one of them.
func TestRepinHoldsARecordsOfflineCPUsAndGivenAwayNeedsAnotherHolder(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", desktopPools)
	off := withOffline(a.Topology(), 7)
	b, _ := a.Rebase(off, mustHotplug(t, a, off, desktopPools))

	rec := remembered(t, "x", "4-7", "")
	assert.False(t, b.GivenAway(rec, set(t, "4-5")), "CPU 7 is offline: no shrink gave it back")
	assert.False(t, b.GivenAway(rec, set(t, "4-6")), "CPU 7 is offline")
	assert.False(t, b.GivenAway(rec, set(t, "4-5,7")), "nobody has CPU 6")

	_, outcome, err := b.Repin(Remembered{Assignment: remembered(t, "z", "7", ""), RunsOn: set(t, "12")})
	assert.Equal(t, NeedsPlacement, outcome, "every CPU of its record offline: nothing to pin it on")
	assert.ErrorContains(t, err, "every one it runs on")

	_, outcome, err = b.Readmit(Remembered{Assignment: remembered(t, "y", "6", ""), RunsOn: set(t, "6")})
	require.NoError(t, err)
	require.Equal(t, Kept, outcome)
	assert.True(t, b.GivenAway(rec, set(t, "4-5,7")), "container y has CPU 6")
	assert.False(t, b.GivenAway(rec, set(t, "4-5")), "CPU 7 is offline, though y has CPU 6")

	rec2 := remembered(t, "w", "5,7", "")
	res, outcome, err := b.Repin(Remembered{Assignment: rec2, RunsOn: set(t, "5")})
	require.NoError(t, err)
	require.Equal(t, Repinned, outcome)
	assert.Equal(t, "5,7", res.Assignment.CPUs.String(), "its offline CPU 7 stays its own")
}
