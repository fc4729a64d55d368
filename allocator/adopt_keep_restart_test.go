package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// A container placed again at restart that has a hold of its last run
// (same pod and container) and runs on CPUs it cannot keep (another
// container's) must still get its hold back, as Allocate gave it before
// keepAndGrow: the refused restore must not have dropped the hold.
func TestAdoptRefusedKeepDoesNotLoseTheContainersOwnHold(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	_, how, err := a.Adopt(exclusive("b", 1), set(t, "2"), set(t, ""))
	require.NoError(t, err)
	require.Equal(t, StaysWhereItRuns, how)
	req := exclusive("new", 4)
	hold := Hold{Assignment: Assignment{ID: "old", Pod: req.Pod, Container: req.Container, Pool: req.Pool,
		MilliCPU: 4000, CPUs: set(t, "5-6,13-14"), Reserved: cpuset.New()}}
	_, err = a.RestoreHold(hold)
	require.NoError(t, err)
	res, _, err := a.Adopt(req, set(t, "1-2"), set(t, ""))
	require.NoError(t, err)
	assert.Equal(t, "5-6,13-14", res.Assignment.CPUs.String(), "its own hold's CPUs, as Allocate gives them")
}

// A full-pcpus-only container is never placed on split cores; kept on the
// CPUs it runs on (one thread of two cores) and grown by a whole core, it
// must not be either: its cpuset changes anyway, a new decision.
func TestAdoptKeepAndGrowDoesNotSplitCoresOfAFullPCPUsOnlyContainer(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	req := exclusive("a", 4)
	req.Options.FullPCPUsOnly = true
	res, _, err := a.Adopt(req, set(t, "1-2"), set(t, ""))
	require.NoError(t, err)
	cpus := res.Assignment.CPUs
	for _, cpu := range cpus.List() {
		sib := cpu + 8
		if cpu >= 8 {
			sib = cpu - 8
		}
		assert.True(t, cpus.Contains(sib), "CPU %d without its sibling %d: %s", cpu, sib, cpus)
	}
}

// A full-pcpus-only container that runs on a whole core (5 and its sibling
// 13) of its pool, free, and asks for 2 more CPUs is kept there and grown
// by a whole core, as a live grow does: placed anew it was moved off whole
// cores it may keep.
func TestAdoptKeepAndGrowKeepsAFullPCPUsOnlyContainerOnWholeCores(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	req := exclusive("a", 4)
	req.Options.FullPCPUsOnly = true
	res, how, err := a.Adopt(req, set(t, "5,13"), set(t, ""))
	require.NoError(t, err)
	assert.Equal(t, PlacedAsNew, how, "its cpuset changes: the runtime must be told")
	cpus := res.Assignment.CPUs
	require.Equal(t, 4, cpus.Size())
	assert.True(t, set(t, "5,13").IsSubsetOf(cpus), "kept on the whole core 5,13: %s", cpus)
	assert.Nil(t, a.partCore(cpus), "grown by a whole core: %s", cpus)
}

// As TestAdoptRefusedKeepDoesNotLoseTheContainersOwnHold, but the container
// runs on as many CPUs as it asks for (Adopt's StaysWhereItRuns restore, not
// keepAndGrow), one of them another container's: that restore is refused
// too, and must leave the hold of its last run, which Allocate then gives
// it back (it was dropped before the refusal, and the container placed on
// other CPUs while its pod's hold was gone).
func TestAdoptRefusedStayDoesNotLoseTheContainersOwnHold(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	_, how, err := a.Adopt(exclusive("b", 1), set(t, "2"), set(t, ""))
	require.NoError(t, err)
	require.Equal(t, StaysWhereItRuns, how)
	req := exclusive("new", 4)
	hold := Hold{Assignment: Assignment{ID: "old", Pod: req.Pod, Container: req.Container, Pool: req.Pool,
		MilliCPU: 4000, CPUs: set(t, "5-6,13-14"), Reserved: cpuset.New()}}
	_, err = a.RestoreHold(hold)
	require.NoError(t, err)
	res, _, err := a.Adopt(req, set(t, "1-2,9-10"), set(t, ""))
	require.NoError(t, err)
	assert.Equal(t, "5-6,13-14", res.Assignment.CPUs.String(), "its own hold's CPUs, as Allocate gives them")
}

// A container that runs on 2 free CPUs of its pool (3-4) and asks for 4
// has a hold of its last run of another size (2 CPUs 5-6: a resize since).
// Allocate cannot give it that hold back (ownHoldFits: same size only):
// the hold must not send it there, or it is moved off CPUs it runs on and
// may keep. Kept, the hold ends, as any re-add ends it.
func TestAdoptKeepAndGrowWithAHoldOfAnotherSizeStaysWhereItRuns(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	req := exclusive("new", 4)
	hold := Hold{Assignment: Assignment{ID: "old", Pod: req.Pod, Container: req.Container, Pool: req.Pool,
		MilliCPU: 2000, CPUs: set(t, "5-6"), Reserved: cpuset.New()}}
	_, err := a.RestoreHold(hold)
	require.NoError(t, err)
	res, _, err := a.Adopt(req, set(t, "3-4"), set(t, ""))
	require.NoError(t, err)
	assert.True(t, set(t, "3-4").IsSubsetOf(res.Assignment.CPUs), "kept on the free CPUs 3-4 it runs on, got %s", res.Assignment.CPUs)
}

// A container that runs on part of the hold of its last run (CPU 2 of 2-3)
// is kept there, which ends the hold, but cannot grow: infra must keep 2
// CPUs not isolated, and the growth takes one from it. Undone, the hold
// must be back as it was, so that Allocate gives the container its hold
// (already held: infra does not change); without it the placement anew
// takes 2 CPUs from infra and is refused.
func TestAdoptKeptButNotGrownGetsTheHoldOfItsLastRunBack(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", "isolatedCPUs: \"1\"\nreservedCPUs: \"0\"\npools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 2}}")
	req := exclusive("new", 2)
	req.Pool = pools.ExclusiveNonIsolcpus
	_, err := a.RestoreHold(Hold{Assignment: Assignment{ID: "old", Pod: req.Pod, Container: req.Container, Pool: req.Pool,
		MilliCPU: 2000, CPUs: set(t, "2-3"), Reserved: cpuset.New()}})
	require.NoError(t, err)
	res, how, err := a.Adopt(req, set(t, "2"), set(t, ""))
	require.NoError(t, err)
	assert.Equal(t, PlacedAsNew, how)
	assert.Equal(t, "2-3", res.Assignment.CPUs.String(), "its hold's CPUs")
	assert.Empty(t, a.Holds(), "it runs again: the hold is over")
}
