package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
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
	f := newFakeRuntime(t, false)
	const grantCPUs = "3,5,43,45" // where claim uid-1 is placed when they are free
	tok := keptGrantToken(t, f, grantCPUs)
	first := startDRA(t, f)
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	first.prepare(t, "uid-1", 1, 4, claimPod)
	require.Equal(t, grantCPUs, first.claimCPUs(t, "uid-1"))
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	first.kill()

	second := startDRA(t, f)
	late := &api.Container{Id: "ctr-old-app", PodSandboxId: old.Id, Name: "app", State: api.ContainerState_CONTAINER_RUNNING,
		Env: []string{EnvGrant + "=" + tok},
		Linux: &api.LinuxContainer{CgroupsPath: old.Linux.CgroupParent + "/ctr-old-app",
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: grantCPUs, Shares: api.UInt64(10), Period: api.UInt64(100000)}}}}
	f.mkCgroup(late.Linux.CgroupsPath)
	require.NoError(t, os.WriteFile(filepath.Join(f.hierarchy(), late.Linux.CgroupsPath, "cpuset.cpus"), []byte(grantCPUs+"\n"), 0o644))
	_, err := second.p.Synchronize(context.Background(), []*api.PodSandbox{claimPod, old}, []*api.Container{late})
	require.NoError(t, err)

	a, ok := second.p.alloc.Get(late.Id)
	require.True(t, ok, "adopted")
	assert.Equal(t, grantCPUs, a.Cpuset().String(), "the running grant container stays on its CPUs; rule %+v; log:\n%s", a.Rule, second.log.String())

	claim := second.claim("uid-1", 1, 4, claimPod)
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
	f := newFakeRuntime(t, false)
	const claimCPUs = "3,5,43,45" // where claim uid-1 is placed when they are free
	tok := keptGrantToken(t, f, claimCPUs)
	first := startDRA(t, f)
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	env := first.prepare(t, "uid-1", 1, 4, claimPod)
	require.Equal(t, claimCPUs, first.claimCPUs(t, "uid-1"))
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	first.kill()

	second := startDRA(t, f)
	_, err := second.p.Synchronize(context.Background(), []*api.PodSandbox{claimPod, old}, nil)
	require.NoError(t, err)
	_, _, err = f.createWithEnv(old, "app", 10, EnvGrant+"="+tok)
	require.Error(t, err, "a grant container being created must not get a remembered claim's CPUs")
	assert.Contains(t, err.Error(), "CPUs 3,5,43,45 are prepared for DRA claim telco/claim-uid-1/cpus")

	again := second.prepare(t, "uid-1", 1, 4, claimPod)
	assert.Equal(t, claimCPUs, second.claimCPUs(t, "uid-1"), "kept")
	assert.Equal(t, env, again, "same token")
	_, resp, err := f.createWithEnv(claimPod, "fwd", 10, again...)
	require.NoError(t, err, "the claim's container gets its prepared CPUs")
	assert.Equal(t, claimCPUs, resp.Adjust.Linux.Resources.Cpu.Cpus)
}
