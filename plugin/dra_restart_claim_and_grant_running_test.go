package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The claim was answered and the daemon restarted quietly; while it was
// away the runtime created, unadjusted, both the claim's own container
// (showing the claim's token) and a device-plugin-era grant container on
// the claim's CPUs. The restarted daemon's Synchronize meets both running
// and unknown; the grant container's ID happens to sort first. The
// claim's own container must get the claim's CPUs; the grant container
// must not.
func TestRestartAdoptsTheClaimsOwnContainerNotAGrantContainerOnItsCPUs(t *testing.T) {
	r := prepareClaimOnKeptGrant(t)
	r.restartAfter(t, r.first.stop)
	requireClaimContainerAdoptedBeforeGrantContainer(t, r)
}

// The same with the claims file still marking the claim unanswered (a kill
// -9 after the kubelet was answered, before the background write that
// clears the mark): the claim is unconfirmed, and a running grant
// container adopted first would be kept on its CPUs. Containers showing
// claim tokens are adopted first, whatever their IDs: the claim's own
// container binds its request, which then beats the grant container.
func TestRestartAdoptsAnUnansweredClaimsOwnContainerBeforeAGrantContainer(t *testing.T) {
	r := prepareClaimOnKeptGrant(t)
	r.restartAfter(t, r.first.kill) // the claims file still has the mark
	requireClaimContainerAdoptedBeforeGrantContainer(t, r)
}

// requireClaimContainerAdoptedBeforeGrantContainer: the restarted daemon's
// Synchronize meets the claim's own container and a grant container whose
// ID sorts first, both running unpinned; the claim's container gets the
// claim's CPUs, the grant container does not.
func requireClaimContainerAdoptedBeforeGrantContainer(t *testing.T, r *claimRestart) {
	t.Helper()
	grantCtr := r.unpinnedGrantContainer(t, "")
	grantCtr.Id = "0a" + grantCtr.Id // the runtime's IDs are random hex: this one sorts first
	claimCtr := r.unpinned(t, r.claimPod, "fwd", "", r.env...)
	r.synchronize(t, grantCtr, claimCtr)

	a, ok := r.second.p.alloc.Get(claimCtr.Id)
	require.True(t, ok)
	assert.Equal(t, restartClaimCPUs, a.Cpuset().String(), "the claim's own container gets its claim's CPUs; rule %+v; log:\n%s", a.Rule, r.second.log.String())
	if g, ok := r.second.p.alloc.Get(grantCtr.Id); ok {
		assert.NotEqual(t, restartClaimCPUs, g.Cpuset().String(), "not the grant container")
	}
}
