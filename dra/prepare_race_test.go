package dra

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// offlineAfterPlace are Static pools where the CPUs of the first placement
// go offline as soon as it returns: the pools change between a Prepare's
// placement and its record, as a config reload or a hotplug can.
type offlineAfterPlace struct {
	*Static
	mu      sync.Mutex
	offline cpuset.CPUSet
}

func (p *offlineAfterPlace) Place(pool string, numa, n int, exclude cpuset.CPUSet) (cpuset.CPUSet, error) {
	cpus, err := p.Static.Place(pool, numa, n, exclude)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.offline.IsEmpty() {
		p.offline = cpus
	}
	return cpus, err
}

func (p *offlineAfterPlace) Layout() (*sysfs.Topology, *allocator.Layout) {
	topo, layout := p.Static.Layout()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.offline.IsEmpty() {
		return topo, layout
	}
	t := *topo
	t.CPUs = slices.Clone(topo.CPUs)
	for i := range t.CPUs {
		if p.offline.Contains(t.CPUs[i].ID) {
			t.CPUs[i].Online = false
		}
	}
	return &t, layout
}

// A Prepare whose CPUs left their pool (here: went offline) between the
// placement and the record fails, and puts back what it reserved: the
// claim is not recorded and its hugepages are nobody's. A reload in that
// window cannot see the claim (Pending), so the Prepare checks the pools
// again once the claim is recorded.
func TestPrepareFailsWhenThePoolsChangeAfterThePlacement(t *testing.T) {
	s := hugeXeon(t, 0, xeonConfig)
	pools := &offlineAfterPlace{Static: s}
	d := newTestDriver(t, pools)
	res := prepare(t, d.Driver, hugePagesClaim("uid-1", 1, 2, 16, "pod-1"))["uid-1"]
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "the pools changed while it was placed")
	assert.Contains(t, res.Err.Error(), "CPUs \""+pools.offline.String()+"\"")
	assert.Empty(t, d.Claims())
	assert.Empty(t, d.Pending())
	assert.Empty(t, s.Allocator().ClaimReservations(), "its hugepages are given back")
}
