package plugin

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/dra"
)

// placeThenCreate is the plugin's pools with hook run once, right after
// the driver's Place returned: the plugin's lock is free again and the
// driver has not recorded the claim yet (Place takes the plugin's lock, the
// record the driver's, one after the other).
type placeThenCreate struct {
	*Plugin
	hook func()
}

func (r *placeThenCreate) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	cpus, err := r.Plugin.Place(pool, numa, n, exclude)
	if r.hook != nil {
		h := r.hook
		r.hook = nil
		h()
	}
	return cpus, err
}

// A container showing a kept device plugin grant is created between a
// Prepare's placement and the driver's record of the claim (after a
// reboot the kubelet prepares claims and re-creates pods at once). Before,
// the grant check saw only recorded claims: the grant's container was
// pinned on the CPUs just placed for the claim, and the claim's own
// container was refused, blamed on the grant's "ending" pod. Now the claim
// being placed is seen from its placement on: the grant's container is
// refused (the kubelet retries it), the claim is prepared on its CPUs and
// its container gets them, and the grant's retry is told about the claim.
func TestDRAGrantContainerCreatedWhileAClaimIsPlacedDoesNotTakeItsCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	const claimCPUs = "3,5,43,45"
	tok := keptGrantToken(t, f, claimCPUs)
	pools := &placeThenCreate{}
	n := &draNode{f: f, cdi: filepath.Join(f.dir, "cdi")}
	n.runningPlugin = startPluginWith(t, f, xeonDRA, statePath(f), func(r *runningPlugin) {
		pools.Plugin = r.p
		d, err := dra.New(pools, dra.Options{NodeName: "node-a", ClaimsFile: dra.ClaimsFile(statePath(f)), CDIDir: n.cdi, Log: r.p.log})
		require.NoError(t, err)
		r.p.UseClaims(d)
		n.driver = d
	})
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	var grantErr error
	pools.hook = func() { _, _, grantErr = f.createWithEnv(old, "app", 10, EnvGrant+"="+tok) }
	claim := n.claim("uid-1", 1, 4, claimPod)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)
	require.Equal(t, claimCPUs, n.claimCPUs(t, "uid-1"), "the claim is placed on the kept grant's CPUs")

	require.Error(t, grantErr, "a grant container created while the claim was placed must not be pinned on its CPUs")
	assert.Contains(t, grantErr.Error(), "container telco/old/app: "+EnvGrant+": CPUs 3,5,43,45 may be placed for DRA claim telco/claim-uid-1/cpus, which is being prepared right now; retry in a moment (the kubelet retries a container's creation)")

	_, resp, err := f.createWithEnv(claimPod, "fwd", 10, n.cdiEnv(t, "uid-1")...)
	require.NoError(t, err, "the claim's container gets its prepared CPUs")
	assert.Equal(t, claimCPUs, resp.Adjust.Linux.Resources.Cpu.Cpus)

	_, _, err = f.createWithEnv(old, "app", 10, EnvGrant+"="+tok)
	require.Error(t, err, "the kubelet's retry of the grant container")
	assert.Contains(t, err.Error(), "CPUs 3,5,43,45 are prepared for DRA claim telco/claim-uid-1/cpus; this pod was allocated by the device plugin before the node moved to DRA")
}

// The device plugin's Allocate (Grant, with the driver on: a plugin wired
// by hand) asked while a claim is being placed on those CPUs. Its refusal
// said "retry in a moment (the kubelet retries a container's creation)",
// as a container's creation is told; but an Allocate is the kubelet's
// admission of the pod, which it does not retry: the pod fails
// (UnexpectedAdmissionError) and waiting does nothing.
func TestDRAGrantAskedWhileAClaimIsPlacedSaysTheAllocationIsNotRetried(t *testing.T) {
	f := newFakeRuntime(t, false)
	pools := &placeThenCreate{}
	n := &draNode{f: f, cdi: filepath.Join(f.dir, "cdi")}
	n.runningPlugin = startPluginWith(t, f, xeonDRA, statePath(f), func(r *runningPlugin) {
		pools.Plugin = r.p
		d, err := dra.New(pools, dra.Options{NodeName: "node-a", ClaimsFile: dra.ClaimsFile(statePath(f)), CDIDir: n.cdi, Log: r.p.log})
		require.NoError(t, err)
		r.p.UseClaims(d)
		n.driver = d
	})
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	var grantErr error
	pools.hook = func() { _, grantErr = n.p.Grant([]string{"3", "5", "43", "45"}) }
	claim := n.claim("uid-1", 1, 4, claimPod)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)
	require.Equal(t, "3,5,43,45", n.claimCPUs(t, "uid-1"), "the claim is placed on the CPUs asked")

	require.Error(t, grantErr)
	assert.Equal(t, "CPUs 3,5,43,45 may be placed for DRA claim telco/claim-uid-1/cpus, which is being prepared right now; "+
		"the kubelet does not retry a device plugin allocation (the pod fails admission, UnexpectedAdmissionError); "+
		"the DRA driver hands out the exclusive pool on this node, and the device plugin may not give its CPUs", grantErr.Error())
	assert.NotContains(t, grantErr.Error(), "retr"+"y in a moment")
}
