package dra

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// preparedOn is PreparedOn's answer, for comparing.
type preparedOn struct {
	claim string
	on    string
}

func askPreparedOn(d *Driver, cpus cpuset.CPUSet) preparedOn {
	claim, on := d.PreparedOn(cpus)
	return preparedOn{claim, on.String()}
}

// The plugin asks PreparedOn for every container that shows a device
// plugin grant, under its lock: with no claim prepared (a node that only
// ever used the device plugin) it allocates nothing.
func TestPreparedOnWithNoClaimAllocatesNothing(t *testing.T) {
	d := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	cpus := cpuset.New(3, 5, 43, 45)
	allocs := testing.AllocsPerRun(100, func() {
		if claim, on := d.PreparedOn(cpus); claim != "" || !on.IsEmpty() {
			t.Fatalf("no claim is prepared: got %q %s", claim, on)
		}
	})
	assert.Zero(t, allocs)

	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-1")
	require.NoError(t, prepare(t, d.Driver, claim)["uid-1"].Err)
	on := cpusOf(t, d.Driver, "uid-1", "cpus")
	assert.Equal(t, preparedOn{"ns/app/cpus", on.String()}, askPreparedOn(d.Driver, on.Union(cpus)))
	unprepare(t, d.Driver, "uid-1")
	assert.Equal(t, preparedOn{"", ""}, askPreparedOn(d.Driver, on))
}
