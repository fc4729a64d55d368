package plugin

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/pools"
)

// desktopDRA is desktop with the DRA driver on.
var desktopDRA = testNode{fixture: desktop.fixture, config: desktop.config + "dra: {enabled: true}\n"}

// publishedSlices is how many CPUs the last published slices offer in
// the exclusive pool's device of NUMA node 0 (the default model).
type publishedSlices struct {
	mu   sync.Mutex
	cpus int64
	n    int
}

func (s *publishedSlices) publish(r resourceslice.DriverResources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.cpus = 0
	for _, pool := range r.Pools {
		for _, sl := range pool.Slices {
			for _, d := range sl.Devices {
				if d.Name == dra.GroupName(pools.Exclusive, 0) {
					c := d.Capacity[dra.CapacityCPUs].Value
					s.cpus = c.Value()
				}
			}
		}
	}
	return nil
}

func (s *publishedSlices) exclusive() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cpus
}

// TestReloadKeepsPreparedClaims (issue 34): a DRA claim prepared for a pod
// whose container has not started yet blocks a reload that takes its CPUs
// out of their pool, naming the claim, as a running container does; the
// old config stays. A reload that leaves them is applied, and the slices
// follow it. Once the container runs, the reload is refused naming it.
func TestReloadKeepsPreparedClaims(t *testing.T) {
	f := newFakeRuntime(t, true)
	n := startDRAOn(t, f, desktopDRA)
	var slices publishedSlices
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.driver.Run(ctx, slices.publish)
	require.Eventually(t, func() bool { return slices.exclusive() == 8 }, 3*time.Second, 5*time.Millisecond, "published: %d", slices.exclusive())

	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	env := n.prepare(t, "uid-1", 0, 2, pod)
	require.Equal(t, "4,12", n.claimCPUs(t, "uid-1"))

	err := n.p.Reload(reloadConfig(t, n.runningPlugin, desktopShifted+"dra: {enabled: true}\n"), nil, "test")
	var re *ReloadError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, ReloadRefused, re.Result)
	require.Len(t, re.Blockers, 1)
	assert.Equal(t, "DRA claim telco/claim-uid-1/cpus", re.Blockers[0].Who)
	assert.Equal(t, "4,12", re.Blockers[0].CPUs.String())
	assert.Contains(t, err.Error(), "DRA claim telco/claim-uid-1/cpus (CPUs 4,12)")
	assert.Contains(t, n.log.String(), "would move: DRA claim telco/claim-uid-1/cpus (exclusive, CPUs 4,12): the claim was prepared with CPUs 4,12 of pool exclusive for pods uid-dpdk")
	assert.Equal(t, "4-7,12-15", n.p.alloc.Layout().Exclusive.String(), "the old config stays")

	// One that leaves the claim's CPUs in the pool is applied; the slices
	// offer the smaller pool.
	require.NoError(t, n.p.Reload(reloadConfig(t, n.runningPlugin, desktopGrown+"dra: {enabled: true}\n"), nil, "test"))
	assert.Equal(t, "4-6,12-14", n.p.alloc.Layout().Exclusive.String())
	require.Eventually(t, func() bool { return slices.exclusive() == 6 }, 3*time.Second, 5*time.Millisecond,
		"the slices follow the reload: %d exclusive CPUs published", slices.exclusive())

	// The container starts on the claim's CPUs, which are then its own.
	_, resp, err := f.createWithEnv(pod, "fwd", 10, env...)
	require.NoError(t, err)
	assert.Equal(t, "4,12", resp.Adjust.Linux.Resources.Cpu.Cpus)
	err = n.p.Reload(reloadConfig(t, n.runningPlugin, desktopShifted+"dra: {enabled: true}\n"), nil, "test")
	require.ErrorAs(t, err, &re)
	require.Len(t, re.Blockers, 1)
	assert.Equal(t, "telco/dpdk/fwd", re.Blockers[0].Who, "the container now, not the claim")
}
