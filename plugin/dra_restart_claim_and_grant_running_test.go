package plugin

import (
	"context"
	"testing"

	"github.com/containerd/nri/pkg/api"
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
	f := newFakeRuntime(t, false)
	const claimCPUs = "3,5,43,45"
	tok := keptGrantToken(t, f, claimCPUs)
	first := startDRA(t, f)
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	env := first.prepare(t, "uid-1", 1, 4, claimPod)
	require.Equal(t, claimCPUs, first.claimCPUs(t, "uid-1"))
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	first.stop()

	second := startDRA(t, f)
	unpinned := func(pod *api.PodSandbox, name string, env []string) *api.Container {
		c := &api.Container{Id: "ctr-" + pod.Name + "-" + name, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_RUNNING, Env: env,
			Linux: &api.LinuxContainer{CgroupsPath: pod.Linux.CgroupParent + "/ctr-" + pod.Name + "-" + name,
				Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(10), Period: api.UInt64(100000)}}}}
		f.mkCgroup(c.Linux.CgroupsPath)
		return c
	}
	grantCtr := unpinned(old, "app", []string{EnvGrant + "=" + tok})
	grantCtr.Id = "0a" + grantCtr.Id // the runtime's IDs are random hex: this one sorts first
	claimCtr := unpinned(claimPod, "fwd", env)
	_, err := second.p.Synchronize(context.Background(), []*api.PodSandbox{claimPod, old}, []*api.Container{grantCtr, claimCtr})
	require.NoError(t, err)

	a, ok := second.p.alloc.Get(claimCtr.Id)
	require.True(t, ok)
	assert.Equal(t, claimCPUs, a.Cpuset().String(), "the claim's own container gets its claim's CPUs; rule %+v; log:\n%s", a.Rule, second.log.String())
	if g, ok := second.p.alloc.Get(grantCtr.Id); ok {
		assert.NotEqual(t, claimCPUs, g.Cpuset().String(), "not the grant container")
	}
}

// The same with the claims file still marking the claim unanswered (a kill
// -9 after the kubelet was answered, before the background write that
// clears the mark): the claim is unconfirmed, and a running grant
// container adopted first would be kept on its CPUs. Containers showing
// claim tokens are adopted first, whatever their IDs: the claim's own
// container binds its request, which then beats the grant container.
func TestRestartAdoptsAnUnansweredClaimsOwnContainerBeforeAGrantContainer(t *testing.T) {
	f := newFakeRuntime(t, false)
	const claimCPUs = "3,5,43,45"
	tok := keptGrantToken(t, f, claimCPUs)
	first := startDRA(t, f)
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	env := first.prepare(t, "uid-1", 1, 4, claimPod)
	require.Equal(t, claimCPUs, first.claimCPUs(t, "uid-1"))
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	first.kill() // the claims file still has the mark

	second := startDRA(t, f)
	unpinned := func(pod *api.PodSandbox, name string, env []string) *api.Container {
		c := &api.Container{Id: "ctr-" + pod.Name + "-" + name, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_RUNNING, Env: env,
			Linux: &api.LinuxContainer{CgroupsPath: pod.Linux.CgroupParent + "/ctr-" + pod.Name + "-" + name,
				Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(10), Period: api.UInt64(100000)}}}}
		f.mkCgroup(c.Linux.CgroupsPath)
		return c
	}
	grantCtr := unpinned(old, "app", []string{EnvGrant + "=" + tok})
	grantCtr.Id = "0a" + grantCtr.Id // sorts first
	claimCtr := unpinned(claimPod, "fwd", env)
	_, err := second.p.Synchronize(context.Background(), []*api.PodSandbox{claimPod, old}, []*api.Container{grantCtr, claimCtr})
	require.NoError(t, err)

	a, ok := second.p.alloc.Get(claimCtr.Id)
	require.True(t, ok)
	assert.Equal(t, claimCPUs, a.Cpuset().String(), "the claim's own container gets its claim's CPUs; rule %+v; log:\n%s", a.Rule, second.log.String())
	if g, ok := second.p.alloc.Get(grantCtr.Id); ok {
		assert.NotEqual(t, claimCPUs, g.Cpuset().String(), "not the grant container")
	}
}
