package plugin

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/dra"
)

// placeThenReload is the plugin's pools with a config reload landing right
// after a Prepare's placement returned, before the driver recorded the
// claim: the two take the plugin's lock apart (Place under it, the record
// under the driver's), so a reload (SIGHUP, the file changing) can come
// in between.
type placeThenReload struct {
	*Plugin
	once   sync.Once
	reload func()
}

func (p *placeThenReload) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	cpus, err := p.Plugin.Place(pool, numa, n, exclude)
	p.once.Do(p.reload)
	return cpus, err
}

// TestDRAReloadBetweenPlaceAndRecordFailsThePrepare: the reload's check of
// prepared claims (claimBlockers, through Pending) cannot see a claim
// whose CPUs are placed but not recorded yet, so a reload that takes them
// out of the pool is applied; the Prepare then finds its CPUs outside the
// pool as now laid out and fails, with nothing recorded, rather than tell
// the kubelet the claim is prepared on CPUs its container would be refused
// (outside its pool) for as long as the claim stays prepared. The
// kubelet's retry places it in the new pool.
func TestDRAReloadBetweenPlaceAndRecordFailsThePrepare(t *testing.T) {
	f := newFakeRuntime(t, true)
	n := &draNode{f: f, cdi: f.dir + "/cdi"}
	var reloadErr error
	n.runningPlugin = startPluginWith(t, f, desktopDRA, statePath(f), func(rp *runningPlugin) {
		pools := &placeThenReload{Plugin: rp.p}
		pools.reload = func() {
			reloadErr = rp.p.Reload(reloadConfig(t, rp, desktopShifted+"dra: {enabled: true}\n"), nil, "test")
		}
		d, err := dra.New(pools, dra.Options{NodeName: "node-a", ClaimsFile: dra.ClaimsFile(statePath(f)), CDIDir: n.cdi, Log: rp.p.log})
		require.NoError(t, err)
		rp.p.UseClaims(d)
		n.driver = d
	})
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	claim := n.claim("uid-1", 0, 2, pod)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, reloadErr, "the reload was applied: no claim blocked it")
	n.p.mu.Lock()
	excl := n.p.alloc.Layout().Exclusive
	n.p.mu.Unlock()
	if res[claim.UID].Err == nil {
		cpus := mustParse(n.claimCPUs(t, "uid-1"))
		t.Fatalf("claim prepared with CPUs %s while the exclusive pool is now %s: %s are outside it", cpus, excl, cpus.Difference(excl))
	}
	require.ErrorContains(t, res[claim.UID].Err, "the pools changed while it was placed")
	require.NotContains(t, n.driver.Claims(), "uid-1", "nothing recorded")
	require.Empty(t, n.driver.Pending())

	// The kubelet retries: placed in the pool as it is now.
	env := n.prepare(t, "uid-1", 0, 2, pod)
	cpus := mustParse(n.claimCPUs(t, "uid-1"))
	require.True(t, cpus.IsSubsetOf(excl), "CPUs %s in pool %s", cpus, excl)
	_, _, err = f.createWithEnv(pod, "app", 0, env...)
	require.NoError(t, err)
}
