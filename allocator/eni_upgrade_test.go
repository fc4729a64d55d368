package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestInfraKeepsABalancedCPU (review 59c): minInfraCPUs counts the CPUs
// of infra the kernel balances, not the isolated ones left to infra:
// lending every lendable CPU would leave infra's containers (kube-system,
// the CNI) on isolated CPUs only. It counted them before.
func TestInfraKeepsABalancedCPU(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\npools: {exclusive: {count: 8}, exclusive-non-isolcpus: {enabled: true}}")
	l := a.Layout()
	require.Equal(t, "0-1,6-9,14-15", l.Infra.String())
	require.Equal(t, "0-1,8-9", l.ExclusiveNonIsolcpus.String())
	require.Equal(t, 1, l.MinInfraCPUs)
	_, err := a.Allocate(Request{ID: "kube-proxy", Pool: pools.Infra})
	require.NoError(t, err)
	eni := exclusive("eni", 4)
	eni.Pool = pools.ExclusiveNonIsolcpus
	_, err = a.Allocate(eni)
	left := a.PoolCPUs(pools.Infra)
	t.Logf("allocate 4 of exclusive-non-isolcpus: err=%v; infra left %s, isolated %s", err, left, l.Isolated)
	assert.False(t, left.Difference(l.Isolated).IsEmpty(),
		"infra was left only isolated CPUs %s (minInfraCPUs=%d counted them)", left, l.MinInfraCPUs)
}

// TestUpgradeKeepsALentIsolatedCPU (review 59c): a container an older
// release lent isolated CPU 6 (exclusive-non-isolcpus lent every
// non-reserved infra CPU before 45be3fd) is kept where it runs at the
// upgrade's restart, without a problem, and a reload that keeps the pools
// as they are is not refused for it (every reload was, a logLevel change
// too, until the container ended).
func TestUpgradeKeepsALentIsolatedCPU(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\npools: {exclusive: {count: 8}, exclusive-non-isolcpus: {enabled: true}}")
	l := a.Layout()
	require.True(t, l.Infra.Contains(6) && !l.ExclusiveNonIsolcpus.Contains(6))
	eni := Assignment{ID: "old-eni", Pod: PodRef{Namespace: "telco", Name: "lent", UID: "u1"}, Container: "app",
		Pool: pools.ExclusiveNonIsolcpus, MilliCPU: 1000, CPUs: cpuset.New(6)}
	_, how, err := a.Readmit(Remembered{Assignment: eni, RunsOn: cpuset.New(6)})
	require.NoError(t, err)
	require.Equal(t, Kept, how)
	assert.False(t, a.PoolCPUs(pools.Infra).Contains(6), "kept: 6 is out of infra")
	_, blockers := a.Relayout(l) // the same layout: nothing of the pools changes
	assert.Empty(t, blockers, "a reload that keeps the pools as they are is refused")
}

// TestUpgradeKeepsALentIsolatedCPUWhenNothingIsLendable (review 59d):
// the same upgrade as TestUpgradeKeepsALentIsolatedCPU, on a node whose
// infra is only reserved and isolated CPUs: the older release lent
// isolated CPU 6; the new one lends none (ExclusiveNonIsolcpus is empty,
// though the pool is enabled). keepable fell back to the empty pool then,
// so the container was kept with a problem and blocked every reload.
func TestUpgradeKeepsALentIsolatedCPUWhenNothingIsLendable(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0-1,8-9\"\npools: {exclusive: {count: 8}, exclusive-non-isolcpus: {enabled: true}}")
	l := a.Layout()
	require.True(t, l.Infra.Contains(6))
	require.True(t, l.ExclusiveNonIsolcpus.IsEmpty(), "nothing lendable: %s", l.ExclusiveNonIsolcpus)
	eni := Assignment{ID: "old-eni", Pod: PodRef{Namespace: "telco", Name: "lent", UID: "u1"}, Container: "app",
		Pool: pools.ExclusiveNonIsolcpus, MilliCPU: 1000, CPUs: cpuset.New(6)}
	_, how, err := a.Readmit(Remembered{Assignment: eni, RunsOn: cpuset.New(6)})
	require.NoError(t, err)
	assert.Equal(t, Kept, how)
	_, blockers := a.Relayout(l)
	assert.Empty(t, blockers, "a reload that keeps the pools as they are is refused")
}
