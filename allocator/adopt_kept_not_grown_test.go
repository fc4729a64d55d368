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

// A kept-but-not-grown adoption is undone by hand (Release, putBack,
// restoreFollowers), not by never making it: the growth's placement reads
// the allocator as the keeping left it (the hold's CPUs free, the kept
// CPUs the container's, its memory counted), so a dry run would need that
// state without the allocator, a second placement. The undo must then be
// exact: every record the keeping and the release touched (holds, owners,
// containers and their indexes, infra and shared members, memory per
// node, claims) is as it was before keepAndGrow, compared field by field.
func TestAdoptKeptButNotGrownLeavesTheAllocatorAsItFoundIt(t *testing.T) {
	a, req := keptNotGrownTwin(t)
	before := stateSnapshot(a)
	req.running = true // as Adopt calls it
	_, ok := a.keepAndGrow(req, set(t, "2"), set(t, "1"))
	require.False(t, ok, "the growth is refused: infra must keep 2 CPUs")
	assertSameState(t, before, stateSnapshot(a))
	assert.NoError(t, a.mem.Verify())
}

// As TestAdoptKeptButNotGrownLeavesTheAllocatorAsItFoundIt, with the
// shared pool's followers too: after a config change an exclusive
// container kept where it runs holds the whole shared pool (4,12), so its
// members and the shared part of an exclusive container that asked for it
// run on infra, and follow it when the ended hold lends infra its CPUs.
func TestAdoptKeptButNotGrownLeavesSharedFollowersAsItFoundThem(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", sharedMovedTo4+"  exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 2}\n")
	_, _, _ = a.Readmit(Remembered{Assignment: remembered(t, "old", "4,12", ""), RunsOn: set(t, "4,12")})
	require.True(t, a.PoolCPUs(pools.Shared).IsEmpty(), "the shared pool is held")
	_, err := a.Allocate(Request{ID: "batch", Pod: PodRef{UID: "uid-batch"}, Container: "app", Pool: pools.Shared})
	require.NoError(t, err)
	_, err = a.Allocate(Request{ID: "web", Pod: PodRef{UID: "uid-web"}, Container: "app", Pool: pools.Infra})
	require.NoError(t, err)
	ws := exclusive("poll", 1)
	ws.WithShared = true
	_, err = a.Allocate(ws)
	require.NoError(t, err)
	req := exclusive("new", 3)
	req.Pool = pools.ExclusiveNonIsolcpus
	_, err = a.RestoreHold(Hold{Assignment: Assignment{ID: "last", Pod: req.Pod, Container: req.Container, Pool: req.Pool,
		MilliCPU: 2000, CPUs: set(t, "1,9"), Reserved: cpuset.New()}})
	require.NoError(t, err)
	for _, id := range []string{"batch", "web", "poll"} {
		c := a.containers[id]
		t.Logf("%s: cpus %s shared %s", id, c.CPUs, c.Shared)
	}
	t.Logf("infra %s", a.PoolCPUs(pools.Infra))
	before := stateSnapshot(a)
	req.running = true // as Adopt calls it
	_, ok := a.keepAndGrow(req, set(t, "1"), set(t, ""))
	require.False(t, ok, "the growth is refused: infra must keep 2 CPUs")
	assertSameState(t, before, stateSnapshot(a))
	assert.NoError(t, a.mem.Verify())
}

// As TestAdoptKeptButNotGrownLeavesTheAllocatorAsItFoundIt, with the
// growth refused for its count, not for room: a full-pcpus-only container
// kept on a whole core (5,13) that asks for 3 CPUs, no count of whole
// cores. The hold of its last run (5,13 and 6,14) ends on keeping and must
// be back whole, with its memory.
func TestAdoptKeptButNotGrownForItsCountLeavesTheAllocatorAsItFoundIt(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `pools: {exclusive: {cpus: "1-7,9-15"}}`)
	_, err := a.Allocate(exclusive("other", 2))
	require.NoError(t, err)
	req := exclusive("new", 3)
	req.Options.FullPCPUsOnly = true
	_, err = a.RestoreHold(Hold{Assignment: Assignment{ID: "last", Pod: req.Pod, Container: req.Container, Pool: req.Pool,
		MilliCPU: 4000, CPUs: set(t, "5-6,13-14"), Reserved: cpuset.New()}})
	require.NoError(t, err)
	before := stateSnapshot(a)
	req.running = true // as Adopt calls it
	_, ok := a.keepAndGrow(req, set(t, "5,13"), set(t, ""))
	require.False(t, ok, "3 CPUs are no whole cores")
	assertSameState(t, before, stateSnapshot(a))
}
