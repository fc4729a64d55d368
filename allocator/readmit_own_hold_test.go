package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// Readmit reads every owner of its record's CPUs but the container itself
// as another's, the hold of its own last run (same pod and container, the
// stopped container's id) included. No caller meets such a hold: a
// restart's Synchronize readmits into an empty allocator and restores the
// holds after (and RestoreHold refuses the hold of a container that runs
// again), and a reload's Relayout does the same in its trial allocator.
// These tests pin what a caller outside that order would see (Readmit's
// comment says why the order matters), so that a change of it shows.

// ownHoldOn is an allocator with the hold of the last run of the container
// of r (another container id) on cpus.
func ownHoldOn(t *testing.T, r Assignment, cpus string) *Allocator {
	t.Helper()
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	_, err := a.RestoreHold(Hold{Assignment: Assignment{ID: "last-run", Pod: r.Pod, Container: r.Container, Pool: r.Pool,
		MilliCPU: r.MilliCPU, CPUs: set(t, cpus), Reserved: cpuset.New()}})
	require.NoError(t, err)
	return a
}

// A container that runs on its record, whose CPUs the hold of its own last
// run has, is not kept but refused into NeedsRepin, with nothing added and
// the hold left as it is; Repin then ends the hold and pins it back on the
// same CPUs. Nothing is lost or moved, but the runtime is told to pin it
// where it already runs.
func TestReadmitWithItsOwnHoldPresentNeedsRepinAndRepinTakesItsCPUsBack(t *testing.T) {
	rec := remembered(t, "web", "3-4", "")
	a := ownHoldOn(t, rec, "3-4")
	before := stateSnapshot(a)
	_, outcome, err := a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "3-4")})
	require.NoError(t, err)
	assert.Equal(t, NeedsRepin, outcome, "the hold of its last run reads as another's")
	assertSameState(t, before, stateSnapshot(a), "NeedsRepin adds nothing and keeps the hold")
	res, outcome, err := a.Repin(Remembered{Assignment: rec, RunsOn: set(t, "3-4")})
	require.NoError(t, err)
	assert.Equal(t, Repinned, outcome)
	assert.Equal(t, "3-4", res.Assignment.CPUs.String())
	assert.Empty(t, a.Holds(), "it runs again: the hold of its last run is over")
}

// The same container running on another free set of its size (5-6), its
// record's CPUs (3-4) held by its own last run: in Synchronize's order it
// is KeptWhereItRuns on 5-6; with the hold present it NeedsRepin, and
// Repin moves it back onto 3-4. This is the move the order prevents.
func TestReadmitWithItsOwnHoldPresentMovesAContainerOffWhereItRuns(t *testing.T) {
	rec := remembered(t, "web", "3-4", "")
	inOrder := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	_, outcome, err := inOrder.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "5-6")})
	require.NoError(t, err)
	require.Equal(t, KeptWhereItRuns, outcome, "readmitted before any hold: kept where it runs")

	a := ownHoldOn(t, rec, "3-4")
	_, outcome, err = a.Readmit(Remembered{Assignment: rec, RunsOn: set(t, "5-6")})
	require.NoError(t, err)
	assert.Equal(t, NeedsRepin, outcome)
	res, outcome, err := a.Repin(Remembered{Assignment: rec, RunsOn: set(t, "5-6")})
	require.NoError(t, err)
	assert.Equal(t, Repinned, outcome)
	assert.Equal(t, "3-4", res.Assignment.CPUs.String(), "moved off 5-6, where it ran")
}
