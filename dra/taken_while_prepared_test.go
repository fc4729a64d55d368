package dra

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// heldFrom are Static pools where containers hold what held says: the
// plugin's Held once it adopted a running container on those CPUs.
// onHeld, when set, runs at each Held first (what the plugin, under its
// lock, could be asked right then); afterHeld once Held has read what it
// returns (what the plugin could be asked right after).
type heldFrom struct {
	*Static
	mu        sync.Mutex
	held      cpuset.CPUSet
	onHeld    func()
	afterHeld func()
}

func (p *heldFrom) Held(string) cpuset.CPUSet {
	p.mu.Lock()
	h := p.onHeld
	p.mu.Unlock()
	if h != nil {
		h()
	}
	p.mu.Lock()
	held, after := p.held.Union(cpuset.New()), p.afterHeld
	p.mu.Unlock()
	if after != nil {
		after()
	}
	return held
}

// Place does not choose what containers hold, as the plugin's.
func (p *heldFrom) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	p.mu.Lock()
	held := p.held.Union(cpuset.New())
	p.mu.Unlock()
	return p.Static.Place(pool, numa, n, exclude.Union(held))
}

func (p *heldFrom) hold(cpus cpuset.CPUSet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = p.held.Union(cpus)
}

// onSave runs hook once, at the next claims file write, before it.
func onSave(td *testDriver, hook func()) {
	replace := td.store.replace
	td.store.replace = func(path string, data []byte, durable bool) error {
		if hook != nil {
			h := hook
			hook = nil
			h()
		}
		return replace(path, data, durable)
	}
}

// A claim recorded by its Prepare is "being prepared" (PreparedOn's
// maybe) until the claims file holds it, not "prepared" from its record
// on: the plugin confines a running device plugin grant container on a
// prepared claim's CPUs for good, and the Prepare may still fail (a
// running container adopted meanwhile, the claims file).
func TestAClaimIsBeingPreparedUntilTheClaimsFileHoldsIt(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	topo, _ := s.Layout()
	node1 := mustNode(t, topo, 1)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	var atRecord, atSave []preparedOn
	// Asked at the first read only: each "being prepared" answer stands
	// for a container adopted then, and the last look reads the CPUs
	// containers hold again after one.
	p.onHeld = func() {
		if len(atRecord) == 0 {
			atRecord = append(atRecord, askPreparedOn(td.Driver, node1))
		}
	}
	onSave(td, func() { atSave = append(atSave, askPreparedOn(td.Driver, node1)) })
	require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-1", "x", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-1"].Err)
	p.onHeld = nil
	cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
	require.NotEmpty(t, atRecord, "Held asked once the claim is recorded")
	assert.Equal(t, preparedOn{"ns/x/cpus", cpus.String(), true}, atRecord[0], "recorded, not written yet")
	assert.Equal(t, []preparedOn{{"ns/x/cpus", cpus.String(), true}}, atSave, "while the claims file is written")
	assert.Equal(t, preparedOn{"ns/x/cpus", cpus.String(), false}, askPreparedOn(td.Driver, node1), "prepared")
}

// A running container the plugin adopts on a claim's new CPUs while its
// claims file is written (not refused: the claim is only being prepared)
// fails the Prepare at the last look after the write: the claim is taken
// back exactly (record, memory, claims file, no CDI spec), so that it is
// never prepared on CPUs a container runs on, and the kubelet's retry
// places it over the CPUs left.
func TestARunningContainerTakingAClaimsCPUsWhileItIsWrittenFailsThePrepare(t *testing.T) {
	s := hugeXeon(t, 0, xeonConfig)
	topo, _ := s.Layout()
	node1 := mustNode(t, topo, 1)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	claim := shareClaim("uid-1", "c", pools.Exclusive, 1, 2, "p")
	claim.Status.Allocation.Devices.Results[0].ConsumedCapacity[CapacityMemory] = resource.MustParse("1Gi")
	var taken cpuset.CPUSet
	onSave(td, func() {
		got := askPreparedOn(td.Driver, node1)
		require.True(t, got.maybe, "being prepared: the plugin adopts the running container: %+v", got)
		taken = cpusOf(t, td.Driver, "uid-1", "cpus")
		p.hold(taken)
	})
	res := prepare(t, td.Driver, claim)["uid-1"]
	require.Error(t, res.Err)
	assert.Equal(t, `claim ns/c: request cpus: CPUs "`+taken.String()+`" were taken by a running container while it was prepared; the kubelet retries`, res.Err.Error())
	assert.Empty(t, td.Claims(), "taken back")
	assert.Empty(t, s.Allocator().ClaimReservations(), "its memory given back")
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOn(td.Driver, node1))
	assert.False(t, fileExists(cdiFile(td.cdi, "uid-1")), "no CDI spec")
	assert.Empty(t, td.restart(t).Claims(), "the claims file holds it no more")

	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err, "the kubelet's retry")
	assert.True(t, cpusOf(t, td.Driver, "uid-1", "cpus").Intersection(taken).IsEmpty(), "placed over the CPUs left")
	assert.Len(t, s.Allocator().ClaimReservations(), 1)
}

// The last look fails every claim of the kubelet call, not only the one a
// container took CPUs of: here B was placed on the CPUs A had before it
// was allocated again elsewhere, and A's taking back gives them to A
// again. Taken back alone, A and B would share them.
func TestAClaimTakenBackAfterItsWriteTakesBackTheCallsOtherClaims(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-a"].Err)
	old := cpusOf(t, td.Driver, "uid-a", "cpus")

	var bOn cpuset.CPUSet
	onSave(td, func() {
		bOn = cpusOf(t, td.Driver, "uid-b", "cpus")
		p.hold(cpusOf(t, td.Driver, "uid-a", "cpus"))
	})
	res := prepare(t, td.Driver,
		allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 2, 0, 4)}, "pod-1"),
		allocatedClaim("uid-b", "b", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-2"))
	require.Equal(t, old, bOn, "B was placed on A's CPUs from before")
	require.Error(t, res["uid-a"].Err)
	assert.Contains(t, res["uid-a"].Err.Error(), "were taken by a running container while it was prepared")
	require.Error(t, res["uid-b"].Err)
	assert.Equal(t, "claim ns/b: taken back with claim ns/a of the same Prepare, whose CPUs a running container took while they were prepared; the kubelet retries", res["uid-b"].Err.Error())
	assert.Equal(t, old, cpusOf(t, td.Driver, "uid-a", "cpus"), "A as before")
	assert.NotContains(t, td.Claims(), "uid-b")
	assert.Equal(t, preparedOn{"ns/a/cpus", old.String(), false}, askPreparedOn(td.Driver, old))
	d2 := td.restart(t)
	assert.Equal(t, old.String(), d2.Claims()["uid-a"].Requests["cpus"].CPUs, "the claims file as before")
	assert.NotContains(t, d2.Claims(), "uid-b")
}

// A claim allocated again elsewhere keeps its CPUs from before, prepared,
// until its new placement is recorded: its Prepare may still fail and
// leave it there. A request part placed (its first NUMA node) while its
// record is still the one from before is not "being prepared" on the CPUs
// of that record.
func TestAClaimAllocatedAgainStaysPreparedOnItsCPUsUntilRecorded(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	ask := &askDuringPlace{Static: s}
	td := newTestDriver(t, ask)
	require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-a"].Err)
	old := cpusOf(t, td.Driver, "uid-a", "cpus")
	var got []preparedOn
	ask.calls = 0
	ask.before = func(call int, _ cpuset.CPUSet) {
		if call == 1 {
			got = append(got, askPreparedOn(td.Driver, old))
		}
	}
	alloc := append(slotsOn(pools.Exclusive, 2, 0, 2), slotsOn(pools.Exclusive, 3, 0, 2)...)
	require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-a", "a", slots{"cpus": alloc}, "pod-1"))["uid-a"].Err)
	assert.Equal(t, []preparedOn{{"ns/a/cpus", old.String(), false}}, got)
}
