package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestUpgradeKeepsALentIsolatedCPUWhenNothingIsLendable (review 59d):
// the same upgrade as TestUpgradeKeepsALentIsolatedCPU, on a node whose
// infra is only reserved and isolated CPUs: the older release lent
// isolated CPU 6; the new one lends none (ExclusiveNonIsolcpus is empty,
// though the pool is enabled), and keepable then falls back to the empty
// pool, so the container is kept with a problem and blocks every reload.
func TestUpgradeKeepsALentIsolatedCPUWhenNothingIsLendable(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0-1,8-9\"\npools: {exclusive: {count: 8}, exclusive-non-isolcpus: {enabled: true}}")
	l := a.Layout()
	require.True(t, l.Infra.Contains(6))
	require.True(t, l.ExclusiveNonIsolcpus.IsEmpty(), "nothing lendable: %s", l.ExclusiveNonIsolcpus)
	eni := Assignment{ID: "old-eni", Pod: PodRef{Namespace: "telco", Name: "lent", UID: "u1"}, Container: "app",
		Pool: pools.ExclusiveNonIsolcpus, MilliCPU: 1000, CPUs: cpuset.New(6)}
	res, how, err := a.Readmit(Remembered{Assignment: eni, RunsOn: cpuset.New(6)})
	require.NoError(t, err)
	t.Logf("readmit: how=%v result=%+v", how, res)
	assert.Equal(t, Kept, how)
	_, blockers := a.Relayout(l)
	assert.Empty(t, blockers, "a reload that keeps the pools as they are is refused")
}
