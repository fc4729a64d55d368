package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
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
