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

	"github.com/cpupool/nri-cpupool/dra"
)

// poolsBeforePlace is the plugin's pools with hook run once right before
// the driver's Place takes the plugin's lock: the driver has noted the
// placement under way (maybe: its NUMA node's CPUs), the plugin's lock
// is free.
type poolsBeforePlace struct {
	*Plugin
	hook func()
}

func (r *poolsBeforePlace) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	if r.hook != nil {
		h := r.hook
		r.hook = nil
		h()
	}
	return r.Plugin.Place(pool, numa, n, exclude)
}

func startDRABeforePlace(t *testing.T, f *fakeRuntime, pools *poolsBeforePlace) *draNode {
	n := &draNode{f: f, cdi: filepath.Join(f.dir, "cdi")}
	n.runningPlugin = startPluginWith(t, f, xeonDRA, statePath(f), func(r *runningPlugin) {
		pools.Plugin = r.p
		d, err := dra.New(pools, dra.Options{NodeName: "node-a", ClaimsFile: dra.ClaimsFile(statePath(f)), CDIDir: n.cdi, Log: r.p.log})
		require.NoError(t, err)
		r.p.UseClaims(d)
		n.driver = d
	})
	return n
}

// A RUNNING container showing its device plugin grant, which the
// plugin hears of for the first time at its start (CRI-O lists it only
// after the plugin's Synchronize: PostStartContainer adopts it), while a
// claim is being placed on the same NUMA node. The runtime is the truth:
// it runs on its grant's CPUs, nobody else's, and Place (blocked on the
// plugin's lock) will not choose CPUs it holds once adopted. But the
// placing note's "maybe" (the whole NUMA node) refuses its grant, and
// adoptUnknown confines a running container to infra: moved off its
// exclusive CPUs for good, for a placement that never wanted them.
func TestRunningGrantContainerAdoptedWhileAClaimIsPlacedKeepsItsCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	const grantCPUs = "3,5,43,45"
	tok := keptGrantToken(t, f, grantCPUs)
	pools := &poolsBeforePlace{}
	n := startDRABeforePlace(t, f, pools)
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	late := &api.Container{Id: "ctr-old-app", PodSandboxId: old.Id, Name: "app", State: api.ContainerState_CONTAINER_RUNNING,
		Env: []string{EnvGrant + "=" + tok},
		Linux: &api.LinuxContainer{CgroupsPath: old.Linux.CgroupParent + "/ctr-old-app",
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: grantCPUs, Shares: api.UInt64(10), Period: api.UInt64(100000)}}}}
	f.mu.Lock()
	f.ctrs[late.Id] = late
	f.mu.Unlock()
	f.mkCgroup(late.Linux.CgroupsPath)
	require.NoError(t, os.WriteFile(filepath.Join(f.hierarchy(), late.Linux.CgroupsPath, "cpuset.cpus"), []byte(grantCPUs+"\n"), 0o644))

	pools.hook = func() {
		require.NoError(t, f.r.PostStartContainer(context.Background(), &api.PostStartContainerRequest{Pod: old, Container: late}))
	}
	claim := n.claim("uid-1", 1, 4, claimPod)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)

	a, ok := n.p.alloc.Get(late.Id)
	require.True(t, ok, "adopted")
	assert.Equal(t, grantCPUs, a.Cpuset().String(), "a running grant container adopted while a claim is placed stays on its grant's CPUs; log:\n%s", n.log.String())
	claimCPUs, err := cpuset.Parse(n.claimCPUs(t, "uid-1"))
	require.NoError(t, err)
	assert.True(t, claimCPUs.Intersection(cpuset.New(3, 5, 43, 45)).IsEmpty(), "claim on %s", claimCPUs)
}

// The same at a Synchronize after the runtime reconnected (a
// containerd restart; the kubelet created the grant container while no
// plugin was registered): Synchronize, the runtime's truth, confines a
// running container because a claim is being placed at that moment.
func TestResynchronizeWhileAClaimIsPlacedKeepsARunningGrantContainer(t *testing.T) {
	f := newFakeRuntime(t, false)
	const grantCPUs = "3,5,43,45"
	tok := keptGrantToken(t, f, grantCPUs)
	pools := &poolsBeforePlace{}
	n := startDRABeforePlace(t, f, pools)
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	late := &api.Container{Id: "ctr-old-app", PodSandboxId: old.Id, Name: "app", State: api.ContainerState_CONTAINER_RUNNING,
		Env: []string{EnvGrant + "=" + tok},
		Linux: &api.LinuxContainer{CgroupsPath: old.Linux.CgroupParent + "/ctr-old-app",
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: grantCPUs, Shares: api.UInt64(10), Period: api.UInt64(100000)}}}}
	f.mkCgroup(late.Linux.CgroupsPath)
	require.NoError(t, os.WriteFile(filepath.Join(f.hierarchy(), late.Linux.CgroupsPath, "cpuset.cpus"), []byte(grantCPUs+"\n"), 0o644))

	var updates []*api.ContainerUpdate
	pools.hook = func() {
		var err error
		updates, err = n.p.Synchronize(context.Background(), []*api.PodSandbox{claimPod, old}, []*api.Container{late})
		require.NoError(t, err)
	}
	claim := n.claim("uid-1", 1, 4, claimPod)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)

	a, ok := n.p.alloc.Get(late.Id)
	require.True(t, ok, "adopted")
	assert.Equal(t, grantCPUs, a.Cpuset().String(), "updates %v", updates)
	for _, u := range updates {
		assert.NotEqual(t, late.Id, u.GetContainerId(), "the running grant container is moved: %v", u)
	}
}

// poolsAfterPlace runs hook once right after the driver's Place returned
// (the plugin's lock free again, the claim placed and not recorded yet).
type poolsAfterPlace struct {
	*Plugin
	hook func()
}

func (r *poolsAfterPlace) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	cpus, err := r.Plugin.Place(pool, numa, n, exclude)
	if r.hook != nil {
		h := r.hook
		r.hook = nil
		h()
	}
	return cpus, err
}

// A running grant container adopted after the placement chose its very
// CPUs, before the claim is recorded: the container stays where the
// runtime runs it, and the Prepare fails (the kubelet retries it, and the
// retry places the claim elsewhere), never two owners of those CPUs.
func TestRunningGrantContainerAdoptedOnCPUsJustPlacedFailsThePrepare(t *testing.T) {
	f := newFakeRuntime(t, false)
	const grantCPUs = "3,5,43,45"
	tok := keptGrantToken(t, f, grantCPUs)
	after := &poolsAfterPlace{}
	n := &draNode{f: f, cdi: filepath.Join(f.dir, "cdi")}
	n.runningPlugin = startPluginWith(t, f, xeonDRA, statePath(f), func(r *runningPlugin) {
		after.Plugin = r.p
		d, err := dra.New(after, dra.Options{NodeName: "node-a", ClaimsFile: dra.ClaimsFile(statePath(f)), CDIDir: n.cdi, Log: r.p.log})
		require.NoError(t, err)
		r.p.UseClaims(d)
		n.driver = d
	})
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	late := &api.Container{Id: "ctr-old-app", PodSandboxId: old.Id, Name: "app", State: api.ContainerState_CONTAINER_RUNNING,
		Env: []string{EnvGrant + "=" + tok},
		Linux: &api.LinuxContainer{CgroupsPath: old.Linux.CgroupParent + "/ctr-old-app",
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: grantCPUs, Shares: api.UInt64(10), Period: api.UInt64(100000)}}}}
	f.mu.Lock()
	f.ctrs[late.Id] = late
	f.mu.Unlock()
	f.mkCgroup(late.Linux.CgroupsPath)
	require.NoError(t, os.WriteFile(filepath.Join(f.hierarchy(), late.Linux.CgroupsPath, "cpuset.cpus"), []byte(grantCPUs+"\n"), 0o644))

	after.hook = func() {
		require.NoError(t, f.r.PostStartContainer(context.Background(), &api.PostStartContainerRequest{Pod: old, Container: late}))
	}
	claim := n.claim("uid-1", 1, 4, claimPod)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.ErrorContains(t, res[claim.UID].Err, `CPUs "3,5,43,45" were taken by a running container while it was placed; the kubelet retries`)
	assert.Empty(t, n.driver.Claims(), "not prepared")
	a, ok := n.p.alloc.Get(late.Id)
	require.True(t, ok, "adopted")
	assert.Equal(t, grantCPUs, a.Cpuset().String())

	// The kubelet's retry places the claim elsewhere.
	res, err = n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)
	claimCPUs, err := cpuset.Parse(n.claimCPUs(t, "uid-1"))
	require.NoError(t, err)
	assert.True(t, claimCPUs.Intersection(cpuset.New(3, 5, 43, 45)).IsEmpty(), "claim on %s", claimCPUs)
}

// The "maybe" refusal covered the whole NUMA node (less other
// claims), also CPUs the placement can never choose: those held for a
// grant container's own stopped run. Its restart (the kubelet creates the
// container again, same grant) while a claim is placed elsewhere on the
// node is refused ("may be placed for DRA claim ..."), a CreateContainerError
// and a kubelet back-off for a latency-sensitive container, although
// Place (PlaceOn: AvailableCPUs) cannot take held CPUs. claimOnGrant runs
// under the plugin's lock and could refuse only what the placement may
// really choose (maybe ∩ the pool's available CPUs).
func TestGrantContainerRestartIsNotRefusedForAPlacementThatCannotTakeItsCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	const grantCPUs = "3,5,43,45"
	tok := keptGrantToken(t, f, grantCPUs)
	pools := &poolsBeforePlace{}
	n := startDRABeforePlace(t, f, pools)
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	ctr, _, err := f.createWithEnv(old, "app", 10, EnvGrant+"="+tok)
	require.NoError(t, err)
	require.Equal(t, grantCPUs, f.cpus(ctr))
	f.exitContainer(ctr, 1)
	require.NotEmpty(t, n.p.alloc.HoldsOf(old.Uid), "its CPUs are held for the pod")

	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	var again error
	pools.hook = func() { _, _, again = f.createWithEnv(old, "app", 10, EnvGrant+"="+tok) }
	claim := n.claim("uid-1", 1, 4, claimPod)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)
	claimCPUs, err := cpuset.Parse(n.claimCPUs(t, "uid-1"))
	require.NoError(t, err)
	require.True(t, claimCPUs.Intersection(cpuset.New(3, 5, 43, 45)).IsEmpty(), "the claim could not take the held CPUs: %s", claimCPUs)
	assert.NoError(t, again, "the grant container's restart, on CPUs held for it")
}
