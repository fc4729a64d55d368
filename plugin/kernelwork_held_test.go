package plugin

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestKernelWorkHeldWalksTheExclusiveOnly: the RPS and workqueue passes
// (and housekeeping's WorkqueueAlsoOff) ask for the held CPUs under the
// plugin's lock at every pass, three times a pass with both knobs and
// housekeeping: what they copy must not grow with the shared and infra
// containers, which hold nothing (issue 45: the lock's wait grows with
// the node). The answer is the exclusive containers' and holds' CPUs.
func TestKernelWorkHeldWalksTheExclusiveOnly(t *testing.T) {
	cfg, err := config.Parse(strings.NewReader(kernelWorkDesktop.config), "test")
	require.NoError(t, err)
	topo, err := sysfs.Discover(fixture.Root(t, kernelWorkDesktop.fixture))
	require.NoError(t, err)
	layout, problems := allocator.BuildLayout(topo, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	p := &Plugin{cfg: cfg, alloc: allocator.New(topo, layout, false)}
	for i := range 2000 {
		_, err := p.alloc.Allocate(allocator.Request{ID: fmt.Sprintf("s%d", i), Pod: allocator.PodRef{UID: fmt.Sprintf("u%d", i)}, Container: "c",
			Pool: pools.Shared, MilliCPU: 100, NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()})
		require.NoError(t, err)
	}
	x, err := p.alloc.Allocate(allocator.Request{ID: "x", Pod: allocator.PodRef{UID: "ux"}, Container: "c", Pool: pools.Exclusive, MilliCPU: 2000,
		NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()})
	require.NoError(t, err)
	held := p.kernelWorkHeld((*config.Config).RPSHeld)
	assert.Equal(t, x.Assignment.Held(), held())

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 10 {
		held()
	}
	runtime.ReadMemStats(&after)
	perCall := (after.TotalAlloc - before.TotalAlloc) / 10
	assert.Less(t, perCall, uint64(16<<10), "bytes one call allocates beside 2,000 shared containers")
}
