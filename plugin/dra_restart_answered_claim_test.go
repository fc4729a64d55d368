package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A claim the kubelet WAS answered for (Prepare returned, so the kubelet's
// checkpoint says prepared and it never calls Prepare again for this pod),
// its container not started yet. A device-plugin-era grant container on the
// same CPUs is refused at creation (the claim wins). The daemon restarts at
// a quiet moment (no kill -9 race at all: the claims file is complete).
// While it is away (or while the runtime is disconnected) the kubelet's
// retry of the grant container succeeds unpinned. The restarted daemon's
// Synchronize meets it running: the claims file does not mark the claim
// unanswered, so the claim beats it (it is confined), and the claim's own
// container, which the kubelet creates next without any new Prepare, gets
// the claim's CPUs.
func TestRestartDoesNotHandAnAnsweredClaimsCPUsToAGrantContainer(t *testing.T) {
	r := prepareClaimOnKeptGrant(t) // answered: the kubelet will not prepare it again
	_, _, err := r.f.createWithEnv(r.old, "app", 10, EnvGrant+"="+r.tok)
	require.Error(t, err, "the claim wins while the daemon runs")
	second := r.restartAfter(t, r.first.stop) // a quiet restart: state and claims file up to date

	// The grant container the kubelet retried while the daemon was away:
	// created with no adjustment, running unpinned.
	late := r.unpinnedGrantContainer(t, "")
	r.synchronize(t, late)

	if a, ok := second.p.alloc.Get(late.Id); ok {
		assert.NotEqual(t, restartClaimCPUs, a.Cpuset().String(), "the grant container must not take the answered claim's CPUs; rule %+v", a.Rule)
	}
	// The kubelet now creates the claim's container (no new Prepare).
	_, resp, err := r.f.createWithEnv(r.claimPod, "fwd", 10, r.env...)
	require.NoError(t, err, "the claim's container must get its prepared CPUs; log:\n%s", second.log.String())
	assert.Equal(t, restartClaimCPUs, resp.Adjust.Linux.Resources.Cpu.Cpus)
}

// A claim the claims file still marks unanswered (a kill -9 after the
// kubelet was answered, before the write that clears the mark) does not
// beat a grant container the restarted daemon finds running on its CPUs;
// the claim's own container, created next, is refused, and the refusal
// names the claim and the container that holds the CPU, not the kubelet's
// device manager and an ending pod.
func TestClaimContainerRefusedForAHeldCPUNamesTheClaim(t *testing.T) {
	r := prepareClaimOnKeptGrant(t)
	second := r.restartAfter(t, r.first.kill) // the claims file still has the mark

	late := r.unpinnedGrantContainer(t, "")
	r.synchronize(t, late)
	a, ok := second.p.alloc.Get(late.Id)
	require.True(t, ok)
	require.Equal(t, restartClaimCPUs, a.Cpuset().String(), "adopted where its grant is: the claim is not known to be answered")

	_, _, err := r.f.createWithEnv(r.claimPod, "fwd", 10, r.env...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "container telco/dpdk/fwd was given CPU 3 by its ResourceClaims telco/claim-uid-1/cpus, but container ctr-old-app, not the claim's, holds it")
	assert.NotContains(t, err.Error(), "its pod is ending")
}
