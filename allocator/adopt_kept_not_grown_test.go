package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// As TestAdoptKeptButNotGrownGetsTheHoldOfItsLastRunBack, with an infra
// member running. keepAndGrow keeps the container on 2 (infra gets 3 of
// the ended hold: the member is moved onto it), fails to grow, releases it
// (the member is moved onto 2-3) and puts the hold back (2-3 lent again):
// no followInfra runs after the put-back, so the member's record says it
// runs on 2-3, CPUs the container is then given exclusively. The record
// must be infra as it is.
func TestAdoptKeptButNotGrownLeavesInfraMembersOnInfra(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", "isolatedCPUs: \"1\"\nreservedCPUs: \"0\"\npools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 2}}")
	_, err := a.Allocate(Request{ID: "web", Pod: PodRef{UID: "uid-web"}, Container: "app", Pool: pools.Infra})
	require.NoError(t, err)
	req := exclusive("new", 2)
	req.Pool = pools.ExclusiveNonIsolcpus
	_, err = a.RestoreHold(Hold{Assignment: Assignment{ID: "old", Pod: req.Pod, Container: req.Container, Pool: req.Pool,
		MilliCPU: 2000, CPUs: set(t, "2-3"), Reserved: cpuset.New()}})
	require.NoError(t, err)
	infra := a.PoolCPUs(pools.Infra)
	require.True(t, cpulist.Equal(a.containers["web"].CPUs, infra), "web %s, infra %s", a.containers["web"].CPUs, infra)
	res, how, err := a.Adopt(req, set(t, "2"), set(t, ""))
	require.NoError(t, err)
	require.Equal(t, PlacedAsNew, how)
	require.Equal(t, "2-3", res.Assignment.CPUs.String())
	for _, u := range res.Updates {
		t.Logf("update %s %s", u.ID, u.CPUs)
	}
	assert.Equal(t, a.PoolCPUs(pools.Infra).String(), a.containers["web"].CPUs.String(),
		"the infra member's record: infra as it is, not the container's exclusive CPUs")
	assert.False(t, a.containers["web"].CPUs.Intersection(res.Assignment.CPUs).Size() > 0, "infra member recorded on the exclusive CPUs %s", res.Assignment.CPUs)
}

// keptNotGrownTwin builds the allocator of
// TestAdoptKeptButNotGrownLeavesInfraMembersOnInfra with hugepages: a
// bound claim and a hold of the container's last run with 24 pages.
func keptNotGrownTwin(t *testing.T) (*Allocator, Request) {
	a := newAllocator(t, "vm-2numa-hugepages", "isolatedCPUs: \"1\"\nreservedCPUs: \"0\"\npools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 2}}")
	_, err := a.Allocate(Request{ID: "web", Pod: PodRef{UID: "uid-web"}, Container: "app", Pool: pools.Infra})
	require.NoError(t, err)
	req := exclusive("new", 2)
	req.Pool = pools.ExclusiveNonIsolcpus
	req.Demand = numamem.Demand{HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 24}}}
	_, err = a.ReserveClaim(numamem.ClaimMemory{Key: "claim/mem", Held: []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 16}}}}}, nil, false)
	require.NoError(t, err)
	a.BindClaim("claim/mem", req.Pod.UID, req.Container)
	_, err = a.RestoreHold(Hold{Assignment: Assignment{ID: "old", Pod: req.Pod, Container: req.Container, Pool: req.Pool,
		MilliCPU: 2000, CPUs: set(t, "2-3"), Reserved: cpuset.New(),
		Memory: []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 24}}}}}})
	require.NoError(t, err)
	return a, req
}

// Kept on 2 and not grown, the container must end as it ends placed anew
// straight away (not pinned: Allocate gives it its hold): the same CPUs,
// memory, claims and infra members.
func TestAdoptKeptButNotGrownEndsAsPlacedAnew(t *testing.T) {
	kept, req := keptNotGrownTwin(t)
	res, how, err := kept.Adopt(req, set(t, "2"), set(t, "1"))
	require.NoError(t, err)
	require.Equal(t, PlacedAsNew, how)
	anew, _ := keptNotGrownTwin(t)
	want, _, err := anew.Adopt(req, set(t, ""), set(t, ""))
	require.NoError(t, err)
	require.Equal(t, want.Assignment.CPUs.String(), res.Assignment.CPUs.String())
	assert.Equal(t, anew.MemoryUse(), kept.MemoryUse(), "memory counted")
	assert.Equal(t, anew.ClaimReservations(), kept.ClaimReservations())
	assert.NoError(t, kept.mem.Verify())
	assert.Equal(t, anew.containers["web"].CPUs.String(), kept.containers["web"].CPUs.String(), "infra member's record")
}
