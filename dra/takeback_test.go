package dra

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// A claim allocated again elsewhere (same UID) is recorded on its new
// CPUs before the claims file is written. Its CPUs from before stay
// "being prepared" until the call ends: a grant container created on them
// meanwhile is refused for a moment, since the last look, finding the new
// CPUs taken, puts the claim back on them; and it puts it back only where
// no container holds them.
func TestTakeBackDoesNotRestoreAClaimOntoCPUsAContainerTookMeanwhile(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-a"].Err)
	old := cpusOf(t, td.Driver, "uid-a", "cpus")

	var during preparedOn
	onSave(td, func() {
		during = askPreparedOn(td.Driver, old)
		if during.claim == "" {
			// Refused by nothing: the plugin pins a grant container
			// there (or adopts a running one).
			p.hold(old)
		}
		// A running container adopted on the claim's new CPUs.
		p.hold(cpusOf(t, td.Driver, "uid-a", "cpus"))
	})
	res := prepare(t, td.Driver, allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 2, 0, 4)}, "pod-1"))
	require.Error(t, res["uid-a"].Err)
	assert.NotEqual(t, "", during.claim, "the claim's CPUs from before, which a take-back gives it again, are unguarded while the claims file is written: %+v", during)
	now := cpusOf(t, td.Driver, "uid-a", "cpus")
	assert.True(t, p.Held("").Intersection(now).IsEmpty(), "claim a prepared on %s while containers hold %s", now, p.Held(""))
}

// kill -9 after the claims file holds a claim and before the last look: a
// running container adopted on the claim's new CPUs while the file was
// written. The restarted daemon remembers the claim; the kubelet, which
// never got an answer, prepares it again with the same allocation. Kept as
// remembered (fits looks at the layout only), the claim would be prepared
// on CPUs a running container holds, the outcome the last look exists to
// prevent: a remembered request no container is bound to is checked
// against the CPUs containers hold, and placed anew.
func TestKill9BeforeTheLastLookDoesNotPrepareAClaimOnHeldCPUs(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	var written []byte
	replace := td.store.replace
	td.store.replace = func(path string, data []byte, durable bool) error {
		if written == nil {
			p.hold(cpusOf(t, td.Driver, "uid-1", "cpus")) // adopted while written
			written = append([]byte(nil), data...)
		}
		return replace(path, data, durable)
	}
	claim := allocatedClaim("uid-1", "x", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	require.Error(t, prepare(t, td.Driver, claim)["uid-1"].Err, "taken back in this process")
	// The process died right after the first write: the file holds it.
	require.NoError(t, os.WriteFile(td.claims, written, 0o600))
	d2 := td.restart(t)
	require.Contains(t, d2.Claims(), "uid-1")
	// The retry must succeed (a retry failing forever leaves the pod
	// stuck) and place the claim off the CPUs the running container holds.
	res := prepare(t, d2, claim)["uid-1"]
	require.NoError(t, res.Err, "the kubelet's retry after the restart")
	on := d2.Claims()["uid-1"].Requests["cpus"].CPUSet()
	require.False(t, on.IsEmpty())
	assert.True(t, p.Held("").Intersection(on).IsEmpty(), "the kubelet's retry after the restart prepared the claim on %s, which a running container holds", on)
}

// A claim shared by two pods, prepared for pod-1, is prepared again in
// pod-2's kubelet call with the same allocation (kept as it is), beside a
// claim b placed anew. pod-1's container, created meanwhile, binds the
// shared claim's request (its token is known since the first Prepare).
// b's CPUs are taken by a running container, and the take-back puts the
// shared claim back to its record from before the call with that binding:
// without it, a second container showing the same token would be
// accepted, and two containers would get the request's CPUs.
func TestTakeBackKeepsABindingMadeWhileTheCallWasWritten(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	shared := allocatedClaim("uid-s", "s", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-1", "pod-2")
	require.NoError(t, prepare(t, td.Driver, shared)["uid-s"].Err)
	tok := cdiEnv(t, td.cdi, "uid-s")[CDIDeviceID("uid-s", "cpus")]
	first := Container{PodUID: "pod-1", Namespace: "ns", Pod: "one", Name: "app"}
	onSave(td, func() {
		_, ok, err := td.Bind(envWith(tok), first)
		require.NoError(t, err)
		require.True(t, ok)
		p.hold(cpusOf(t, td.Driver, "uid-b", "cpus"))
	})
	res := prepare(t, td.Driver, shared, allocatedClaim("uid-b", "b", slots{"cpus": slotsOn(pools.Exclusive, 2, 0, 2)}, "pod-2"))
	require.Error(t, res["uid-b"].Err)
	assert.Equal(t, "pod-1", td.Claims()["uid-s"].Requests["cpus"].PodUID, "pod-1's container bound the request meanwhile")
	_, _, err := td.Bind(envWith(tok), Container{PodUID: "pod-2", Namespace: "ns", Pod: "two", Name: "app"})
	assert.Error(t, err, "the request already gives its CPUs to pod-1's container")
}

// The "being prepared" of the call's claims ends only once the last look
// has decided: while it reads Held (the plugin's lock, which a
// Synchronize or a container's start may hold), b, whose CPUs nobody took,
// answered "prepared" (maybe false), would get a running grant container
// adopted on them refused and confined for good, and the look, finding
// a's CPUs taken, takes b back too: confined for a claim never prepared.
func TestAClaimTakenBackByTheLastLookIsNeverAnsweredPrepared(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	var bOn cpuset.CPUSet
	var atLook []preparedOn
	saved := false
	onSave(td, func() {
		p.hold(cpusOf(t, td.Driver, "uid-a", "cpus"))
		bOn = cpusOf(t, td.Driver, "uid-b", "cpus")
		saved = true
	})
	p.onHeld = func() {
		if saved {
			atLook = append(atLook, askPreparedOn(td.Driver, bOn))
		}
	}
	res := prepare(t, td.Driver,
		allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-1"),
		allocatedClaim("uid-b", "b", slots{"cpus": slotsOn(pools.Exclusive, 2, 0, 2)}, "pod-1"))
	p.onHeld = nil
	require.Error(t, res["uid-a"].Err)
	require.Error(t, res["uid-b"].Err, "b is taken back")
	require.NotEmpty(t, atLook)
	for _, got := range atLook {
		assert.True(t, got.claim == "" || got.maybe, "b answered prepared while the last look may still take it back: %+v", got)
	}
}

// The same claim allocated again with other memory on the same NUMA node
// (not sameAllocation: placed anew) is placed on its very CPUs from before
// (its own are not excluded). From its placement on they are "being
// prepared" (maybe), so a running grant container adopted on them is not
// refused; the last look finds them taken, and the record from before,
// on exactly those CPUs, is not put back: the claim is released, and the
// kubelet's retry places it anew.
func TestTakeBackDoesNotRestoreAClaimOntoTheCPUsTheLastLookFoundTaken(t *testing.T) {
	s := hugeXeon(t, 0, xeonConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	withMemory := func(q string) *resourceapi.ResourceClaim {
		c := shareClaim("uid-1", "c", pools.Exclusive, 1, 2, "p")
		c.Status.Allocation.Devices.Results[0].ConsumedCapacity[CapacityMemory] = resource.MustParse(q)
		return c
	}
	require.NoError(t, prepare(t, td.Driver, withMemory("1Gi"))["uid-1"].Err)
	old := cpusOf(t, td.Driver, "uid-1", "cpus")
	var during preparedOn
	onSave(td, func() {
		during = askPreparedOn(td.Driver, old)
		if during.claim == "" || during.maybe {
			p.hold(old) // a running grant container the plugin adopts
		}
	})
	res := prepare(t, td.Driver, withMemory("2Gi"))["uid-1"]
	t.Logf("during the write: %+v; result: %v", during, res.Err)
	if c, ok := td.Claims()["uid-1"]; ok {
		assert.True(t, p.Held("").Intersection(c.Requests["cpus"].CPUSet()).IsEmpty(), "claim prepared on %s while a running container holds %s", c.Requests["cpus"].CPUs, p.Held(""))
	}
	require.Error(t, res.Err, "its CPUs are a running container's")
	assert.NotContains(t, td.Claims(), "uid-1", "released, not put back on the CPUs the container holds")
	assert.Empty(t, td.restart(t).Claims(), "the claims file holds it no more")
	assert.Empty(t, s.Allocator().ClaimReservations(), "its memory given back")

	require.NoError(t, prepare(t, td.Driver, withMemory("2Gi"))["uid-1"].Err, "the kubelet's retry")
	assert.True(t, cpusOf(t, td.Driver, "uid-1", "cpus").Intersection(old).IsEmpty(), "placed anew, off the held CPUs")
}

// A running container adopted right after the last look read the CPUs
// containers hold, before it decided: told the claim is being prepared
// (not refused), it holds the claim's new CPUs, which the read did not
// see. The last look reads again when PreparedOn answered "being
// prepared" while it read, and takes the claim back.
func TestTheLastLookReadsAgainWhenAContainerIsAdoptedWhileItReads(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	saved := false
	onSave(td, func() { saved = true })
	var taken cpuset.CPUSet
	var told preparedOn
	p.afterHeld = func() {
		if !saved || !taken.IsEmpty() {
			return
		}
		taken = cpusOf(t, td.Driver, "uid-1", "cpus")
		told = askPreparedOn(td.Driver, taken)
		if told.maybe {
			p.hold(taken) // adopted: a running container is not refused
		}
	}
	res := prepare(t, td.Driver, allocatedClaim("uid-1", "x", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-1"]
	p.afterHeld = nil
	require.False(t, taken.IsEmpty(), "asked during the last look's read")
	require.True(t, told.maybe, "being prepared until the last look decided: %+v", told)
	require.Error(t, res.Err, "the claim's new CPUs are a running container's")
	assert.Contains(t, res.Err.Error(), "were taken by a running container while it was prepared")
	assert.Empty(t, td.Claims(), "taken back")
}

// A claim S (resourceClaimName, outlives its pods) prepared for pod-1,
// whose container bound its request. pod-1 ends without an Unprepare
// reaching the driver (kill -9), and S is reserved for pod-2 now: the
// kubelet prepares it again with the same allocation, beside a claim B
// placed anew. keepRequests unbinds pod-1 (no longer reserved) and pod-2's
// container, created while the claims file is written, binds the request
// (its token is known). B's new CPUs are then taken by a running
// container: the last look takes the call back, and restoreOf "undoes the
// unbinding of the call" by putting pod-1's binding back over pod-2's:
// pod-2's container runs on S's CPUs while the record says pod-1's.
// The kubelet's retry unbinds pod-1 again, and any other container
// showing the token (a pod-3 S is also reserved for) is accepted on the
// CPUs pod-2's container runs on.
func TestTakeBackKeepsABindingMadeOverAnUnbindingOfTheCall(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	first := allocatedClaim("uid-s", "s", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, first)["uid-s"].Err)
	tok := cdiEnv(t, td.cdi, "uid-s")[CDIDeviceID("uid-s", "cpus")]
	_, ok, err := td.Bind(envWith(tok), Container{PodUID: "pod-1", Namespace: "ns", Pod: "one", Name: "app"})
	require.NoError(t, err)
	require.True(t, ok)

	second := allocatedClaim("uid-s", "s", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-2", "pod-3")
	onSave(td, func() {
		_, ok, err := td.Bind(envWith(tok), Container{PodUID: "pod-2", Namespace: "ns", Pod: "two", Name: "app"})
		require.NoError(t, err, "pod-1 is no longer reserved: its binding was cleared")
		require.True(t, ok)
		p.hold(cpusOf(t, td.Driver, "uid-b", "cpus")) // a running container adopted on B's new CPUs
	})
	res := prepare(t, td.Driver, second, allocatedClaim("uid-b", "b", slots{"cpus": slotsOn(pools.Exclusive, 2, 0, 2)}, "pod-2"))
	require.Error(t, res["uid-b"].Err, "B's CPUs were taken")
	assert.Equal(t, "pod-2", td.Claims()["uid-s"].Requests["cpus"].PodUID, "pod-2's container bound the request during the call and runs on its CPUs")

	// The kubelet's retry of S, then a container of pod-3 showing the token.
	require.NoError(t, prepare(t, td.Driver, second)["uid-s"].Err)
	_, _, err = td.Bind(envWith(tok), Container{PodUID: "pod-3", Namespace: "ns", Pod: "three", Name: "app"})
	assert.Error(t, err, "the request's CPUs are pod-2's container's: a second container must not get them")
}

// The last look gives up after settleRounds reads when PreparedOn keeps
// answering "being prepared" while it reads; every such answer counts,
// also one to a grant container that is refused (not running) and holds
// nothing. It then decides as if every CPU were held and fails the
// Prepare saying a running container took the claim's CPUs, which no
// container did: the operator looks for a container that does not exist.
func TestTheLastLookGivingUpDoesNotSayARunningContainerTookTheCPUs(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	saved := false
	onSave(td, func() { saved = true })
	asked := 0
	p.afterHeld = func() {
		if !saved {
			return
		}
		// A grant container being created (not running) on the claim's
		// CPUs: refused for a moment, it holds nothing.
		if got := askPreparedOn(td.Driver, cpusOf(t, td.Driver, "uid-1", "cpus")); got.maybe {
			asked++
		}
	}
	res := prepare(t, td.Driver, allocatedClaim("uid-1", "x", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-1"]
	p.afterHeld = nil
	require.Positive(t, asked)
	assert.True(t, p.Held("").IsEmpty(), "no container holds anything")
	require.Error(t, res.Err, "the last look gave up: the claim's CPUs are not known to be free")
	assert.NotContains(t, res.Err.Error(), "were taken by a running container", "no running container took them: %v", res.Err)
	assert.Contains(t, res.Err.Error(), "kept changing while they were read")
}
