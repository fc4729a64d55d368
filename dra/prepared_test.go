package dra

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/pools"
)

// askDuringPlace are Static pools that call before and after around each
// placement: what the plugin, under its lock, could ask the driver while
// a Prepare places (before: the placement has not taken the lock yet;
// after: it released it, the claim is not recorded).
type askDuringPlace struct {
	*Static
	mu            sync.Mutex
	calls         int
	before, after func(call int, cpus cpuset.CPUSet)
}

func (p *askDuringPlace) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	p.mu.Lock()
	call := p.calls
	p.calls++
	p.mu.Unlock()
	if p.before != nil {
		p.before(call, cpuset.New())
	}
	cpus, err := p.Static.Place(pool, numa, n, exclude)
	if p.after != nil {
		p.after(call, cpus)
	}
	return cpus, err
}

// preparedOn is PreparedOn's answer, for comparing.
type preparedOn struct {
	claim string
	on    string
	maybe bool
}

func askPreparedOn(d *Driver, cpus cpuset.CPUSet) preparedOn {
	claim, on, maybe := d.PreparedOn(cpus, false)
	return preparedOn{claim, on.String(), maybe}
}

// A claim is seen by PreparedOn from its placement on, not only once it
// is recorded: a device plugin grant's container the plugin places
// between the two must not get its CPUs. While a placement is under way
// the CPUs it may choose (its NUMA node's, but another claim's) are named
// as maybe; once it returned, exactly the CPUs it chose, still as maybe
// until the claim is recorded (its Prepare may yet fail).
func TestPreparedOnSeesAClaimFromItsPlacementOn(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	topo, _ := s.Layout()
	ask := &askDuringPlace{Static: s}
	d := newTestDriver(t, ask)
	other := allocatedClaim("uid-0", "other", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-0")
	require.NoError(t, prepare(t, d.Driver, other)["uid-0"].Err)
	otherCPUs := cpusOf(t, d.Driver, "uid-0", "cpus")
	node1, node6 := mustNode(t, topo, 1), mustNode(t, topo, 6)

	var got []preparedOn
	var first cpuset.CPUSet
	ask.calls = 0
	ask.after = func(call int, cpus cpuset.CPUSet) {
		if call == 0 {
			first = cpus
			// Placed, not noted yet: the whole node but the other claim's
			// CPUs may be the claim's.
			got = append(got, askPreparedOn(d.Driver, node1.Difference(otherCPUs)))
			got = append(got, askPreparedOn(d.Driver, otherCPUs))
		}
	}
	ask.before = func(call int, _ cpuset.CPUSet) {
		if call == 1 {
			// The first placement is noted exactly; the second, on node
			// 6, is under way.
			got = append(got, askPreparedOn(d.Driver, node1.Difference(otherCPUs)))
			got = append(got, askPreparedOn(d.Driver, node6))
		}
	}
	alloc := append(slotsOn(pools.Exclusive, 1, 2, 3), slotsOn(pools.Exclusive, 6, 0, 2)...)
	require.NoError(t, prepare(t, d.Driver, allocatedClaim("uid-1", "split", slots{"cpus": alloc}, "pod-1"))["uid-1"].Err)
	require.Equal(t, 3, first.Size())
	assert.Equal(t, []preparedOn{
		{"ns/split/cpus", node1.Difference(otherCPUs).String(), true},
		{"ns/other/cpus", otherCPUs.String(), false},
		{"ns/split/cpus", first.String(), true},
		{"ns/split/cpus", node6.String(), true},
	}, got)

	// Recorded: the claim's own CPUs, nothing in flight.
	cpus := cpusOf(t, d.Driver, "uid-1", "cpus")
	assert.Equal(t, preparedOn{"ns/split/cpus", cpus.String(), false}, askPreparedOn(d.Driver, node1.Union(node6).Difference(otherCPUs)))
	free := node1.Union(node6).Difference(otherCPUs).Difference(cpus)
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOn(d.Driver, free))
}

// A Prepare whose placement fails leaves nothing in flight: its CPUs are
// nobody's.
func TestPreparedOnForgetsAFailedPlacement(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	topo, _ := s.Layout()
	ask := &askDuringPlace{Static: s}
	d := newTestDriver(t, ask)
	var during preparedOn
	node0 := mustNode(t, topo, 0)
	ask.after = func(int, cpuset.CPUSet) { during = askPreparedOn(d.Driver, node0) }
	// Containers hold all but 2 of node 0's exclusive CPUs (as in
	// TestPrepareAvoidsCPUsContainersHold).
	_, err := s.Allocator().Allocate(allocator.Request{ID: "old", Pod: allocator.PodRef{Namespace: "ns", Name: "old", UID: "old"}, Container: "c",
		Pool: pools.Exclusive, MilliCPU: 38000, NUMANodes: set(t, "0"), PreferNUMA: cpuset.New()})
	require.NoError(t, err)
	res := prepare(t, d.Driver, allocatedClaim("uid-1", "big", slots{"cpus": slotsOn(pools.Exclusive, 0, 0, 4)}, "pod-1"))["uid-1"]
	require.ErrorContains(t, res.Err, "pool exclusive has 2 free CPUs on NUMA node 0")
	assert.True(t, during.maybe, "seen while placed: %+v", during)
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOn(d.Driver, node0))
	assert.Empty(t, d.Claims())
}

// The plugin asks PreparedOn for every container that shows a device
// plugin grant, under its lock: with no claim prepared (a node that only
// ever used the device plugin) it allocates nothing.
func TestPreparedOnWithNoClaimAllocatesNothing(t *testing.T) {
	d := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	cpus := cpuset.New(3, 5, 43, 45)
	allocs := testing.AllocsPerRun(100, func() {
		if claim, on, maybe := d.PreparedOn(cpus, false); claim != "" || !on.IsEmpty() || maybe {
			t.Fatalf("no claim is prepared: got %q %s %v", claim, on, maybe)
		}
	})
	assert.Zero(t, allocs)

	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-1")
	require.NoError(t, prepare(t, d.Driver, claim)["uid-1"].Err)
	on := cpusOf(t, d.Driver, "uid-1", "cpus")
	assert.Equal(t, preparedOn{"ns/app/cpus", on.String(), false}, askPreparedOn(d.Driver, on.Union(cpus)))
	unprepare(t, d.Driver, "uid-1")
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOn(d.Driver, on))
}
