package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

func resize(id string, cpus int) Request {
	r := exclusive(id, cpus)
	return r
}

func TestResizeGrowsNearAndShrinksLastAddedFirst(t *testing.T) {
	// xeon-2s-interleaved: even CPUs on node 0, siblings N and N+40,
	// exclusive 2-39,42-79.
	a := newAllocator(t, "xeon-2s-interleaved", "")
	res, err := a.Allocate(exclusive("a", 2))
	require.NoError(t, err)
	require.Equal(t, "2,42", res.Assignment.CPUs.String())
	_, err = a.Allocate(exclusive("b", 2)) // 4,44 on the same node
	require.NoError(t, err)

	res, err = a.Resize(resize("a", 4))
	require.NoError(t, err)
	assert.Equal(t, "2,6,42,46", res.Assignment.CPUs.String(), "a whole core on the same node")
	assert.Equal(t, int64(4000), res.Assignment.MilliCPU)
	res, err = a.Resize(resize("a", 5))
	require.NoError(t, err)
	assert.Equal(t, 5, res.Assignment.CPUs.Size())
	fifth := res.Assignment.CPUs.Difference(set(t, "2,6,42,46"))
	assert.Equal(t, 1, measure(a.Topology(), fifth).numaNodes)
	c, _ := a.Topology().CPU(fifth.List()[0])
	assert.Equal(t, 0, c.NUMA, "same node")
	assert.Equal(t, "2,42", res.Assignment.Original().String())

	res, err = a.Resize(resize("a", 4))
	require.NoError(t, err)
	assert.Equal(t, "2,6,42,46", res.Assignment.CPUs.String(), "the last added CPU goes back first")
	assert.True(t, fifth.IsSubsetOf(a.FreeCPUs(pools.Exclusive)))
	res, err = a.Resize(resize("a", 2))
	require.NoError(t, err)
	assert.Equal(t, "2,42", res.Assignment.CPUs.String())

	before := a.Assignments()
	_, err = a.Resize(resize("a", 1))
	assert.ErrorContains(t, err, "pool exclusive cannot shrink container ns/pod-a/c to 1 CPUs: a resize never gives back the 2 CPUs it was created with (2,42); request at least 2 CPUs; it keeps CPUs 2,42")
	assert.Equal(t, before, a.Assignments(), "a refused resize changes nothing")
	_, err = a.Resize(resize("a", 0))
	assert.ErrorContains(t, err, "to no CPU request")
	_, err = a.Resize(resize("nobody", 2))
	assert.ErrorContains(t, err, "container nobody is not known")
}

func TestResizeCompletesItsOwnHalfCore(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	res, err := a.Allocate(exclusive("a", 1))
	require.NoError(t, err)
	require.Equal(t, "2", res.Assignment.CPUs.String())
	_, err = a.Allocate(exclusive("b", 1)) // the fullest partial core: 42
	require.NoError(t, err)
	_, err = a.Allocate(exclusive("c", 1))
	require.NoError(t, err)
	cpusC, _ := a.Get("c")
	sibling := a.x.cores[a.x.cpus[cpusC.CPUs.List()[0]].core]
	a.Release("b")
	res, err = a.Resize(resize("c", 2))
	require.NoError(t, err)
	assert.Equal(t, cpuset.New(sibling...), res.Assignment.CPUs, "its own core's sibling before the other half-free core")
}

func TestResizeRefusedWhenFullChangesNothing(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"")
	_, err := a.Allocate(exclusive("a", 4))
	require.NoError(t, err)
	_, err = a.Allocate(exclusive("b", 7))
	require.NoError(t, err)
	before, free := a.Assignments(), a.FreeCPUs(pools.Exclusive)
	_, err = a.Resize(resize("a", 6))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool exclusive cannot fit container ns/pod-a/c grown from 4 to 6 CPUs: it asks for 2 more CPUs, but only 1 of the pool's 12 CPUs is free")
	assert.Contains(t, err.Error(), "it keeps CPUs")
	assert.Equal(t, before, a.Assignments())
	assert.Equal(t, free, a.FreeCPUs(pools.Exclusive))

	r := resize("a", 5)
	r.NUMANodes = cpuset.New(1)
	_, err = a.Resize(r)
	assert.ErrorContains(t, err, "on NUMA nodes 1")
}

func TestResizeLeavesItsNodeOnlyWhenFull(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	_, err := a.Allocate(exclusive("a", 2))
	require.NoError(t, err)
	_, err = a.Allocate(exclusive("fill", 36)) // the rest of node 0
	require.NoError(t, err)
	res, err := a.Resize(resize("a", 4))
	require.NoError(t, err)
	added := res.Assignment.CPUs.Difference(set(t, "2,42"))
	s := measure(a.Topology(), added)
	assert.Equal(t, shape{numaNodes: 1, sockets: 1, cores: 1, l3Groups: 1}, s, "one whole core on the other node: %s", added)
}

func TestResizeOfExclusiveNonIsolcpusMovesInfra(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"4-7,12-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 3}}")
	_, err := a.Allocate(Request{ID: "infra1", Pool: pools.Infra})
	require.NoError(t, err)
	r := exclusive("eni", 1)
	r.Pool = pools.ExclusiveNonIsolcpus
	res, err := a.Allocate(r)
	require.NoError(t, err)
	infra := a.PoolCPUs(pools.Infra)
	assert.Equal(t, 7, infra.Size())

	r = exclusive("eni", 2)
	r.Pool = pools.ExclusiveNonIsolcpus
	res, err = a.Resize(r)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Assignment.CPUs.Size())
	assert.True(t, res.InfraChanged)
	require.Len(t, res.Updates, 1)
	assert.Equal(t, "infra1", res.Updates[0].ID)
	assert.Equal(t, 6, res.Updates[0].CPUs.Size())
	assert.True(t, res.Updates[0].CPUs.Intersection(res.Assignment.CPUs).IsEmpty())

	r = exclusive("eni", 6)
	r.Pool = pools.ExclusiveNonIsolcpus
	_, err = a.Resize(r)
	assert.ErrorContains(t, err, "must keep 3 not isolated (pools.exclusive-non-isolcpus.minInfraCPUs)")

	r = exclusive("eni", 1)
	r.Pool = pools.ExclusiveNonIsolcpus
	res, err = a.Resize(r)
	require.NoError(t, err)
	require.Len(t, res.Updates, 1)
	assert.Equal(t, infra, res.Updates[0].CPUs, "infra grows back")
}

func TestResizeOfSharedOnlyRecordsTheRequest(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\npools: {shared: {count: 4}}")
	res, err := a.Allocate(Request{ID: "s", Pool: pools.Shared, MilliCPU: 500})
	require.NoError(t, err)
	cpus := res.Assignment.CPUs
	res, err = a.Resize(Request{ID: "s", Pool: pools.Shared, MilliCPU: 3000})
	require.NoError(t, err)
	assert.Equal(t, cpus, res.Assignment.CPUs)
	assert.Equal(t, int64(3000), res.Assignment.MilliCPU)
	assert.Empty(t, res.Updates)
}

func TestResizeWithHiddenSiblings(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	r := exclusive("h", 2)
	r.Options.HideHyperthreads = true
	_, err := a.Allocate(r)
	require.NoError(t, err)
	r = exclusive("h", 3)
	r.Options.HideHyperthreads = true
	res, err := a.Resize(r)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Assignment.CPUs.Size())
	assert.Equal(t, 3, res.Assignment.Reserved.Size(), "the new CPU's sibling is hidden too")
	r = exclusive("h", 2)
	res, err = a.Resize(r)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Assignment.Reserved.Size(), "its sibling comes back with it")
	assert.Equal(t, 76-4, a.FreeCPUs(pools.Exclusive).Size())
}

func TestRestoreKeepsWhatResizesAdded(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	_, err := a.restore(Assignment{ID: "a", Pod: PodRef{Namespace: "ns", Name: "pod-a", UID: "uid-a"}, Container: "c", Pool: pools.Exclusive,
		CPUs: set(t, "2,4,42,44"), Added: []int{4, 44}})
	require.NoError(t, err)
	res, err := a.Resize(resize("a", 2))
	require.NoError(t, err)
	assert.Equal(t, "2,42", res.Assignment.CPUs.String())
	_, err = a.restore(Assignment{ID: "b", Pool: pools.Exclusive, CPUs: set(t, "6,46"), Added: []int{8}})
	require.NoError(t, err)
	b, _ := a.Get("b")
	assert.Equal(t, "6,46", b.Original().String(), "a record that does not match is all original")
}

// TestResizeReusesThePodsHeldCPUs: a completed container's held CPUs are
// the pod's; a growing container of the pod takes them first, and they
// leave the hold.
func TestResizeReusesThePodsHeldCPUs(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	initC := exclusive("init", 4)
	initC.Pod = PodRef{Namespace: "ns", Name: "job", UID: "uid-job"}
	initC.Container = "init"
	held, err := a.Allocate(initC)
	require.NoError(t, err)
	a.Stop("init", exitCode(0))
	app := initC
	app.ID, app.Container, app.MilliCPU = "app", "app", 2000
	_, err = a.Allocate(app)
	require.NoError(t, err)
	require.Len(t, a.Holds(), 1, "two of the init container's CPUs stay held")
	_, err = a.Allocate(exclusive("other", 2))
	require.NoError(t, err)

	grow := app
	grow.MilliCPU = 4000
	res, err := a.Resize(grow)
	require.NoError(t, err)
	assert.Equal(t, held.Assignment.CPUs, res.Assignment.CPUs, "it grows onto its pod's held CPUs")
	assert.Empty(t, a.Holds(), "what it reuses leaves the hold")
	a.ReleasePod("uid-job")
	appNow, _ := a.Get("app")
	assert.True(t, appNow.CPUs.Intersection(a.FreeCPUs(pools.Exclusive)).IsEmpty(), "releasing the pod frees none of the app's CPUs")
}

// A shrink by a whole core's worth of CPUs after a grow by several cores
// gives back a whole core: desktop-8c16t's siblings are N and N+8, so the
// last k CPUs by id are one thread of k cores, which would leave the
// container on split cores (also under full-pcpus-only) and free orphan
// siblings for the next container.
func TestResizeShrinkByACoreGivesBackAWholeCore(t *testing.T) {
	topo := topology(t, "desktop-8c16t")
	for _, full := range []bool{false, true} {
		a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "2-7,10-15"`)
		req := exclusive("a", 2)
		req.Options.FullPCPUsOnly = full
		_, err := a.Allocate(req)
		require.NoError(t, err)
		req.MilliCPU = 6000
		res, err := a.Resize(req)
		require.NoError(t, err)
		grown := res.Assignment.CPUs
		require.Equal(t, 0, measure(topo, grown).splitCores, "grown to %s", grown)
		req.MilliCPU = 4000
		res, err = a.Resize(req)
		require.NoError(t, err)
		m := measure(topo, res.Assignment.CPUs)
		assert.Equal(t, 0, m.splitCores, "full-pcpus-only=%v: grown to %s, shrunk to %s (added %v); freed %s",
			full, grown, res.Assignment.CPUs, res.Assignment.Added, grown.Difference(res.Assignment.CPUs))
		assert.Equal(t, 0, measure(topo, a.FreeCPUs(pools.Exclusive)).splitCores, "the freed CPUs are a whole core")
		req.MilliCPU = 2000
		res, err = a.Resize(req)
		require.NoError(t, err)
		assert.Equal(t, "2,10", res.Assignment.CPUs.String(), "back to its original core")
	}
}

// A grow that completes the container's own half core and adds a whole
// one gives back the whole one first: giving back the completing sibling
// and one thread of the new core would split two cores.
func TestResizeShrinkKeepsTheCompletedOwnCore(t *testing.T) {
	topo := topology(t, "desktop-8c16t")
	a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "2-7,10-15"`)
	res, err := a.Allocate(exclusive("a", 1))
	require.NoError(t, err)
	require.Equal(t, "2", res.Assignment.CPUs.String())
	res, err = a.Resize(resize("a", 4))
	require.NoError(t, err)
	require.Equal(t, 0, measure(topo, res.Assignment.CPUs).splitCores, "grown to %s", res.Assignment.CPUs)
	res, err = a.Resize(resize("a", 2))
	require.NoError(t, err)
	assert.Equal(t, "2,10", res.Assignment.CPUs.String(), "its own core, completed, stays; the added whole core goes (added %v)", res.Assignment.Added)
}

// full-pcpus-only takes whole cores: a shrink to a size that is not whole
// cores is refused like a grow to it, and changes nothing.
func TestResizeFullPCPUsOnlyRefusesAShrinkToHalfACore(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "2-7,10-15"`)
	req := exclusive("a", 2)
	req.Options.FullPCPUsOnly = true
	_, err := a.Allocate(req)
	require.NoError(t, err)
	req.MilliCPU = 6000
	_, err = a.Resize(req)
	require.NoError(t, err)
	before, free := a.Assignments(), a.FreeCPUs(pools.Exclusive)
	req.MilliCPU = 5000
	_, err = a.Resize(req)
	assert.ErrorContains(t, err, "pool exclusive cannot shrink container ns/pod-a/c to 5 CPUs: full-pcpus-only takes whole cores of 2 threads; request a multiple of 2; it keeps CPUs 2-4,10-12")
	assert.Equal(t, before, a.Assignments(), "a refused shrink changes nothing")
	assert.Equal(t, free, a.FreeCPUs(pools.Exclusive))
	req.MilliCPU = 4000
	_, err = a.Resize(req)
	assert.NoError(t, err, "whole cores")
}

// A release before shrinks went core by core recorded Added by CPU id: a
// full-pcpus-only container grown by cores {3,11} and {4,12} has Added
// [3,4,11,12] in its state file. A shrink by one core's worth after the
// upgrade must still give back a whole core, not 11 and 12 (one thread of
// each), which would leave it on two half cores.
func TestResizeShrinkOfARecordByIDGivesBackWholeCores(t *testing.T) {
	topo := topology(t, "desktop-8c16t")
	a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "2-7,10-15"`)
	_, err := a.restore(Assignment{ID: "c", Pod: PodRef{Namespace: "ns", Name: "pod-c", UID: "uid-c"}, Container: "c",
		Pool: pools.Exclusive, MilliCPU: 6000, CPUs: set(t, "2-4,10-12"), Added: []int{3, 4, 11, 12}})
	require.NoError(t, err)
	r := exclusive("c", 4)
	r.Options.FullPCPUsOnly = true
	res, err := a.Resize(r)
	require.NoError(t, err)
	assert.Equal(t, "2-3,10-11", res.Assignment.CPUs.String(), "the last-recorded core {4,12} goes back whole")
	assert.Equal(t, 0, measure(topo, res.Assignment.CPUs).splitCores)
	assert.Equal(t, 0, measure(topo, a.FreeCPUs(pools.Exclusive)).splitCores, "the freed CPUs are a whole core")
}

// The same record order also holds the sibling that completed the
// container's own core after a whole added core ([3,10,11] for original
// 2): a shrink by one core's worth gives back the added core, not its own
// core's sibling and one thread of the added core.
func TestResizeShrinkOfARecordByIDKeepsTheCompletedOwnCore(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", `isolatedCPUs: "2-7,10-15"`)
	_, err := a.restore(Assignment{ID: "c", Pod: PodRef{Namespace: "ns", Name: "pod-c", UID: "uid-c"}, Container: "c",
		Pool: pools.Exclusive, MilliCPU: 4000, CPUs: set(t, "2-3,10-11"), Added: []int{3, 10, 11}})
	require.NoError(t, err)
	res, err := a.Resize(resize("c", 2))
	require.NoError(t, err)
	assert.Equal(t, "2,10", res.Assignment.CPUs.String())
}

// With both hide-hyperthreads and full-pcpus-only, placement takes
// hide-hyperthreads' mode (one thread per core, each core whole with its
// siblings idle), so any size is placed; a resize accepts the same sizes.
func TestResizeHideAndFullPCPUsResizeLikeTheyPlace(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	both := func(id string, n int) Request {
		r := exclusive(id, n)
		r.Options.HideHyperthreads, r.Options.FullPCPUsOnly = true, true
		return r
	}
	res, err := a.Allocate(both("three", 3))
	require.NoError(t, err, "placed with 3 CPUs: hide-hyperthreads' mode")
	require.Equal(t, 3, res.Assignment.Reserved.Size())

	_, err = a.Allocate(both("h", 2))
	require.NoError(t, err)
	_, err = a.Resize(both("h", 4))
	require.NoError(t, err)
	res, err = a.Resize(both("h", 3))
	require.NoError(t, err, "shrink to 3 CPUs, each a whole core with its sibling idle")
	assert.Equal(t, 3, res.Assignment.CPUs.Size())
	assert.Equal(t, 3, res.Assignment.Reserved.Size(), "the given-back CPU's sibling is no longer hidden")
	res, err = a.Resize(both("h", 5))
	require.NoError(t, err, "grow to 5 CPUs, each a whole core with its sibling idle")
	assert.Equal(t, 5, res.Assignment.Reserved.Size())
}
