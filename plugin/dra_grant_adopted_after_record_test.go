package plugin

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/dra"
)

// poolsAfterRecord runs hook once, at the first Held after a Place: the
// driver's placedStillFit, once the claim is recorded, before it asks
// which CPUs containers hold.
type poolsAfterRecord struct {
	*Plugin
	mu     sync.Mutex
	placed bool
	hook   func()
}

func (r *poolsAfterRecord) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	cpus, err := r.Plugin.Place(pool, numa, n, exclude)
	r.mu.Lock()
	r.placed = true
	r.mu.Unlock()
	return cpus, err
}

func (r *poolsAfterRecord) Held(pool string) cpuset.CPUSet {
	r.mu.Lock()
	h := r.hook
	if r.placed && h != nil {
		r.hook = nil
	} else {
		h = nil
	}
	r.mu.Unlock()
	if h != nil {
		h()
	}
	return r.Plugin.Held(pool)
}

// The Synchronize of TestResynchronizeWhileAClaimIsPlacedKeepsARunningGrantContainer
// a moment later: after the driver recorded the claim, before
// placedStillFit reads Held. PreparedOn said "prepared" (maybe false)
// from the record on: the running grant container was refused and
// confined to infra for good, placedStillFit saw nothing held and the
// claim was prepared on the CPUs the container ran on. The claim is being
// prepared until the claims file holds it: the container stays on its
// CPUs, the Prepare fails, and the kubelet's retry places the claim
// elsewhere.
func TestResynchronizeRightAfterAClaimIsRecordedKeepsARunningGrantContainer(t *testing.T) {
	f := newFakeRuntime(t, false)
	const grantCPUs = "3,5,43,45" // where claim uid-1 is placed when they are free
	tok := keptGrantToken(t, f, grantCPUs)
	pools := &poolsAfterRecord{}
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
	late := &api.Container{Id: "ctr-old-app", PodSandboxId: old.Id, Name: "app", State: api.ContainerState_CONTAINER_RUNNING,
		Env: []string{EnvGrant + "=" + tok},
		Linux: &api.LinuxContainer{CgroupsPath: old.Linux.CgroupParent + "/ctr-old-app",
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: grantCPUs, Shares: api.UInt64(10), Period: api.UInt64(100000)}}}}
	f.mkCgroup(late.Linux.CgroupsPath)
	require.NoError(t, os.WriteFile(filepath.Join(f.hierarchy(), late.Linux.CgroupsPath, "cpuset.cpus"), []byte(grantCPUs+"\n"), 0o644))

	pools.mu.Lock()
	pools.hook = func() {
		_, err := n.p.Synchronize(context.Background(), []*api.PodSandbox{claimPod, old}, []*api.Container{late})
		require.NoError(t, err)
	}
	pools.mu.Unlock()
	claim := n.claim("uid-1", 1, 4, claimPod)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)

	a, ok := n.p.alloc.Get(late.Id)
	require.True(t, ok, "adopted")
	assert.Equal(t, grantCPUs, a.Cpuset().String(), "a running grant container is never refused for a claim being prepared; rule %+v; log:\n%s", a.Rule, n.log.String())
	require.Error(t, res[claim.UID].Err, "the claim's CPUs run a container")
	assert.Contains(t, res[claim.UID].Err.Error(), "were taken by a running container")
	assert.Empty(t, n.driver.Claims())

	res, err = n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err, "the kubelet's retry")
	claimCPUs, err := cpuset.Parse(n.claimCPUs(t, "uid-1"))
	require.NoError(t, err)
	assert.True(t, claimCPUs.Intersection(cpuset.New(3, 5, 43, 45)).IsEmpty(), "claim on %s", claimCPUs)
}
