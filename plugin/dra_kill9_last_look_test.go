package plugin

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/cpuset"
)

// kill -9 between the claims file write and the last look, after a
// running grant container was adopted on the claim's new CPUs while the
// file was written, and before the plugin's own state file (written in
// the background, 2ms after a change) recorded that adoption. The claims
// file holds the claim, unbound, on the container's CPUs, marked
// unanswered: the kubelet never got the reply. The restarted daemon's
// Synchronize meets the running grant container as unknown and asks
// PreparedOn, which must not count the unanswered, unbound claim against
// a running container: the container keeps its CPUs, and the kubelet's
// retry of the Prepare places the claim elsewhere (heldByAnother). Loaded
// as prepared, the container would be confined to infra for good.
func TestKill9BeforeTheLastLookKeepsAnUnrecordedGrantContainerOnItsCPUs(t *testing.T) {
	r := prepareClaimOnKeptGrant(t) // the grant's CPUs are where claim uid-1 is placed
	second := r.restartAfter(t, r.first.kill)
	late := r.unpinnedGrantContainer(t, restartClaimCPUs) // running on its grant's CPUs
	r.synchronize(t, late)

	a, ok := second.p.alloc.Get(late.Id)
	require.True(t, ok, "adopted")
	assert.Equal(t, restartClaimCPUs, a.Cpuset().String(), "the running grant container stays on its CPUs; rule %+v; log:\n%s", a.Rule, second.log.String())

	claim := second.claim("uid-1", 1, 4, r.claimPod)
	res, err := second.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err, "the kubelet's retry")
	on, err := cpuset.Parse(second.claimCPUs(t, "uid-1"))
	require.NoError(t, err)
	assert.True(t, on.Intersection(cpuset.New(3, 5, 43, 45)).IsEmpty(), "claim prepared on %s, where the grant container ran", on)
}

// The same restart with no container on the remembered claim's CPUs: the
// claim is kept as before. A grant container being created is refused
// its CPUs (the kubelet may have been answered, and the claim's container
// may come), the kubelet's next Prepare of the claim succeeds with the
// same CPUs and token, and the claim's container gets them.
func TestRestartKeepsARememberedUnboundClaimNoContainerRunsOn(t *testing.T) {
	r := prepareClaimOnKeptGrant(t)
	second := r.restartAfter(t, r.first.kill)
	r.synchronize(t)
	_, _, err := r.f.createWithEnv(r.old, "app", 10, EnvGrant+"="+r.tok)
	require.Error(t, err, "a grant container being created must not get a remembered claim's CPUs")
	assert.Contains(t, err.Error(), "CPUs 3,5,43,45 are prepared for DRA claim telco/claim-uid-1/cpus")

	again := second.prepare(t, "uid-1", 1, 4, r.claimPod)
	assert.Equal(t, restartClaimCPUs, second.claimCPUs(t, "uid-1"), "kept")
	assert.Equal(t, r.env, again, "same token")
	_, resp, err := r.f.createWithEnv(r.claimPod, "fwd", 10, again...)
	require.NoError(t, err, "the claim's container gets its prepared CPUs")
	assert.Equal(t, restartClaimCPUs, resp.Adjust.Linux.Resources.Cpu.Cpus)
}
