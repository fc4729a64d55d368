package plugin

import (
	"fmt"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
)

// A node that moves from the device plugin to the DRA driver keeps its
// grants file: the kubelet re-creates a pod of its checkpoint (after a
// reboot, say) with the grant token it checkpointed, and the grant's
// CPUs are not in the allocator until its container runs. The driver
// meanwhile places claims over what no container holds, so a claim may
// be prepared on those very CPUs. The claim wins: the scheduler counted
// it, and its container is about to come; the grant's container would
// otherwise run on the claim's CPUs and the claim's own container be
// refused, blamed on the grant's "ending" pod.

// maxClaimEcho bounds the claim name a message repeats: its parts are
// validated Kubernetes names, together up to some 380 bytes.
const maxClaimEcho = 128

// claimOnGrant refuses CPUs of a device plugin grant that a prepared DRA
// claim has, bound to a container or not, naming the claim and saying
// what to do where it is asked (advice). A claim being prepared counts
// from its placement on (the driver places under this lock and records
// the claim under its own, after): until the kubelet call's last look, the
// CPUs it may choose or chose are refused, for a moment (a container's creation,
// which the kubelet retries; an Allocate, which it does not retry, is
// told so). It refuses nothing with the driver off. Called under the lock
// (the driver's is taken under it).
//
// A running container (adopted at its start or at a Synchronize) is never
// refused for a claim being prepared: the runtime is the truth, it runs
// on its grant's CPUs, and nothing would retry it (it would be confined
// to infra for good). Adopted under this lock, its CPUs are held before
// the placement under way can choose them; should the placement already
// have chosen them, the driver's Prepare sees them held once the claim
// is recorded (placedStillFit) or, at the latest, at the kubelet call's
// last look, after the claims file holds it, and fails; the kubelet
// retries it. A claim is being prepared until that last look decided.
// Nor is it refused for a request remembered from the claims file at
// start marked unanswered that no container is bound to and no Prepare
// made again since: that file may hold a Prepare the kubelet was never
// answered (a kill -9 before its last look); the kubelet's next Prepare places the request
// anew off the container's CPUs (see the driver's PreparedOn).
func (p *Plugin) claimOnGrant(cpus cpuset.CPUSet, advice grantAdvice, running bool) error {
	if p.claims == nil {
		return nil
	}
	claim, on, maybe := p.claims.PreparedOn(cpus, running)
	if maybe {
		// The driver names what the placement may choose as the NUMA
		// node's CPUs, not knowing which of them containers hold; under
		// this lock (which Place takes) it may choose only what no
		// container holds now. A CPU held, for instance for this very
		// container's stopped run of the same grant, is never the
		// claim's: refusing it would only cost the container a kubelet
		// back-off.
		on = on.Intersection(p.alloc.AvailableCPUs(pools.Exclusive).Union(p.alloc.AvailableCPUs(pools.ExclusiveNonIsolcpus)))
	}
	if on.IsEmpty() || (maybe && running) {
		return nil
	}
	if len(claim) > maxClaimEcho {
		claim = fmt.Sprintf("%s… (%d bytes)", claim[:maxClaimEcho], len(claim))
	}
	if maybe {
		return fmt.Errorf("%s may be placed for DRA claim %s, which is being prepared right now; %s", plural.CPUs(on), claim, advice.beingPrepared)
	}
	return fmt.Errorf("%s %s prepared for DRA claim %s; %s", plural.CPUs(on), plural.Verb(on.Size(), "is", "are"), claim, advice.prepared)
}

// grantAdvice is what claimOnGrant's refusals advise where it is asked:
// whether the kubelet retries differs. It retries a container's creation;
// it does not retry a device plugin Allocate, which is the pod's
// admission (the pod fails, UnexpectedAdmissionError), so "retry in a
// moment" there sends its owner waiting for a retry that never comes.
type grantAdvice struct {
	// prepared follows "CPUs … are prepared for DRA claim …;".
	prepared string
	// beingPrepared follows "CPUs … may be placed for DRA claim …, which
	// is being prepared right now;".
	beingPrepared string
}

// atCreation advises a container being created (or adopted) that shows
// a grant token.
func atCreation() grantAdvice {
	return grantAdvice{prepared: grantOfTheDevicePluginEra, beingPrepared: "retry in a moment (the kubelet retries a container's creation)"}
}

// atAllocate advises the device plugin's Allocate with the driver on.
func atAllocate() grantAdvice {
	return grantAdvice{prepared: grantWithDRA,
		beingPrepared: "the kubelet does not retry a device plugin allocation (the pod fails admission, UnexpectedAdmissionError); " + grantWithDRA}
}

// grantOnClaim is claimOnGrant for a container being placed (running:
// adopted as the runtime runs it) that shows a grant of cpus in env. One that shows claim tokens as well is not
// refused here: attachClaims refuses it for showing both, naming the
// claims it shows. Told that its grant's CPUs are a claim's and that its
// pod predates the move to DRA, its owner would look for a pod to delete,
// when the claim may be the container's own and the pod spec (or a CDI
// device named by hand) is what to fix.
func (p *Plugin) grantOnClaim(env []string, cpus cpuset.CPUSet, running bool) error {
	if showsClaimTokens(env) {
		return nil
	}
	return p.claimOnGrant(cpus, atCreation(), running)
}

// showsClaimTokens tells whether env sets a claim's variable
// (dracore.EnvPrefix…), whatever its value: attachClaims judges those.
func showsClaimTokens(env []string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, dracore.EnvPrefix) {
			return true
		}
	}
	return false
}

// grantOfTheDevicePluginEra is claimOnGrant's advice to a container that
// shows a grant token: its pod's allocation predates the move to DRA.
const grantOfTheDevicePluginEra = "this pod was allocated by the device plugin before the node moved to DRA: delete the pod, " +
	"so that its controller's new pod is allocated through DRA"

// grantWithDRA is claimOnGrant's advice to a device plugin Allocate with
// the driver on; the config refuses both on one node, so only a plugin
// wired by hand gets here.
const grantWithDRA = "the DRA driver hands out the exclusive pool on this node, and the device plugin may not give its CPUs"
