package allocator

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// allIsolated makes every CPU but the first core exclusive, so placement
// tests see the whole machine.
const allIsolated = "pools: {exclusive: {cpus: %q}}"

func TestPlacementRules(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		config  string
		before  []Request
		req     Request
		want    string // exact cpuset, when the rules leave one answer
		shape   shape  // numaNodes, sockets, cores, l3Groups, splitCores
	}{
		{name: "fits one NUMA node: never spans", fixture: "epyc-2s-384", config: fmt.Sprintf(allIsolated, "1-191,193-383"),
			req: exclusive("a", 48), shape: shape{numaNodes: 1, sockets: 1, cores: 24, l3Groups: 3}},
		{name: "one node too small: two nodes of the same socket", fixture: "epyc-2s-384", config: fmt.Sprintf(allIsolated, "1-191,193-383"),
			req: exclusive("a", 50), shape: shape{numaNodes: 2, sockets: 1, cores: 25, l3Groups: 4}},
		{name: "one L3 group when it holds the request", fixture: "epyc-1s-nps4", config: fmt.Sprintf(allIsolated, "1-63,65-127"),
			req: exclusive("a", 16), shape: shape{numaNodes: 1, sockets: 1, cores: 8, l3Groups: 1}},
		{name: "whole cores for even requests", fixture: "xeon-2s-interleaved", config: "",
			req: exclusive("a", 4), want: "2,4,42,44", shape: shape{numaNodes: 1, sockets: 1, cores: 2, l3Groups: 1}},
		{name: "odd request reuses a half-free core", fixture: "xeon-2s-interleaved", config: "",
			before: []Request{exclusive("first", 1)},
			req:    exclusive("a", 3), want: "4,42,44", shape: shape{numaNodes: 1, sockets: 1, cores: 2, l3Groups: 1, splitCores: 1}},
		{name: "best fit: the fuller NUMA node", fixture: "xeon-2s-interleaved", config: "",
			before: []Request{exclusive("first", 2), exclusive("second", 38)},
			req:    exclusive("a", 2), shape: shape{numaNodes: 1, sockets: 1, cores: 1, l3Groups: 1}},
		{name: "device locality: the device's NUMA node", fixture: "xeon-2s-interleaved", config: "",
			req:   func() Request { r := exclusive("a", 4); r.PreferNUMA = cpuset.New(1); return r }(),
			want:  "3,5,43,45",
			shape: shape{numaNodes: 1, sockets: 1, cores: 2, l3Groups: 1}},
		{name: "NUMA annotation restricts", fixture: "epyc-1s-nps4", config: fmt.Sprintf(allIsolated, "1-63,65-127"),
			req: func() Request { r := exclusive("a", 2); r.NUMANodes = cpuset.New(3); return r }(), want: "48,112",
			shape: shape{numaNodes: 1, sockets: 1, cores: 1, l3Groups: 1}},
		{name: "distribute across the NUMA nodes needed", fixture: "xeon-2s-snc2", config: fmt.Sprintf(allIsolated, "2-39,42-79"),
			req:   func() Request { r := exclusive("a", 24); r.Options.DistributeAcrossNUMA = true; return r }(),
			shape: shape{numaNodes: 2, sockets: 1, cores: 12, l3Groups: 1}},
		{name: "SMT off: one thread per core", fixture: "xeon-1s-nosmt", config: fmt.Sprintf(allIsolated, "1-15"),
			req: exclusive("a", 3), want: "1-3", shape: shape{numaNodes: 1, sockets: 1, cores: 3, l3Groups: 1}},
		{name: "offline sibling: lone thread is a whole core", fixture: "server-offline-isolcpus", config: "pools: {exclusive: {cpus: \"2-6,18-23\"}}",
			before: []Request{exclusive("pairs", 10)},
			req:    exclusive("a", 1), want: "23", shape: shape{numaNodes: 1, sockets: 1, cores: 1, l3Groups: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAllocator(t, tc.fixture, tc.config)
			for _, b := range tc.before {
				_, err := a.Allocate(b)
				require.NoError(t, err)
			}
			res, err := a.Allocate(tc.req)
			require.NoError(t, err)
			got := res.Assignment.CPUs
			assert.Equal(t, CPUsFor(tc.req.MilliCPU), got.Size())
			if tc.want != "" {
				assert.Equal(t, tc.want, got.String())
			}
			assert.Equal(t, tc.shape, measure(a.Topology(), got), "placement %s", got)
			assert.Equal(t, a.Topology().NUMANodesOf(got), res.Assignment.Mems, "mems are the CPUs' nodes")
		})
	}
}

func TestPlacementOptions(t *testing.T) {
	t.Run("hide hyperthreads keeps siblings idle", func(t *testing.T) {
		a := newAllocator(t, "xeon-2s-interleaved", "")
		r := exclusive("a", 4)
		r.Options.HideHyperthreads = true
		res, err := a.Allocate(r)
		require.NoError(t, err)
		s := measure(a.Topology(), res.Assignment.CPUs)
		assert.Equal(t, 4, s.cores)
		assert.Equal(t, 4, res.Assignment.Reserved.Size())
		for _, id := range res.Assignment.CPUs.List() {
			c, _ := a.Topology().CPU(id)
			assert.True(t, c.Siblings.Difference(cpuset.New(id)).IsSubsetOf(res.Assignment.Reserved))
		}
		other, err := a.Allocate(exclusive("b", 36))
		require.NoError(t, err)
		assert.True(t, other.Assignment.CPUs.Intersection(res.Assignment.Held()).IsEmpty(), "siblings are not handed out")
		_, err = a.Allocate(exclusive("c", 68-36+1))
		assert.ErrorContains(t, err, "cannot fit")
	})
	t.Run("full pcpus only from the config refuses odd requests", func(t *testing.T) {
		// The option reaches placement through the policy, which copies the
		// config's allocation options into the request; the allocator reads
		// the request only.
		request := func(cfgYAML, id string, cpus int) Request {
			c := Container{ID: id, Name: "c", Pod: PodRef{Namespace: "ns", Name: "pod-" + id, UID: "uid-" + id},
				MilliCPU: int64(cpus) * 1000, Annotations: map[string]string{AnnotationPool: pools.Exclusive}}
			r, err := NewPolicy(parseConfig(t, cfgYAML), nil).Request(c, nil)
			require.NoError(t, err)
			return r
		}
		full := "allocation: {fullPCPUsOnly: true}"
		a := newAllocator(t, "xeon-2s-interleaved", "")
		_, err := a.Allocate(request(full, "a", 3))
		assert.ErrorContains(t, err, "request a multiple of 2")
		_, err = a.Allocate(request("", "a", 3))
		require.NoError(t, err, "without the option, 3 CPUs fit")

		_, err = a.Allocate(exclusive("half", 1))
		require.NoError(t, err)
		res, err := a.Allocate(request(full, "b", 4))
		require.NoError(t, err)
		assert.Equal(t, 0, measure(a.Topology(), res.Assignment.CPUs).splitCores)
	})
}

func TestPlacementErrors(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"")
	_, err := a.Allocate(exclusive("zero", 0))
	assert.ErrorContains(t, err, "requests no CPU")
	_, err = a.Allocate(exclusive("huge", 13))
	assert.ErrorContains(t, err, "asks for 13 CPUs")
	assert.ErrorContains(t, err, "12 of the pool's 12 CPUs are free")
	_, err = a.Allocate(exclusive("most", 10))
	require.NoError(t, err)
	_, err = a.Allocate(exclusive("full", 3))
	assert.ErrorContains(t, err, `pool exclusive cannot fit container ns/pod-full/c: it asks for 3 CPUs, but only 2 of the pool's 12 CPUs are free (free: "`)
	_, err = a.Allocate(exclusive("two", 2))
	require.NoError(t, err)
	// One CPU asked, none free: singular, and no empty list (review 59b, L1).
	_, err = a.Allocate(exclusive("one", 1))
	assert.EqualError(t, err, `pool exclusive cannot fit container ns/pod-one/c: it asks for 1 CPU, but none of the pool's 12 CPUs are free`)
	r := exclusive("numa", 1)
	r.NUMANodes = cpuset.New(5)
	_, err = a.Allocate(r)
	assert.ErrorContains(t, err, "on NUMA nodes 5")
	_, err = a.Allocate(Request{ID: "s", Pool: pools.Shared})
	assert.ErrorContains(t, err, "pool shared has no CPUs")
	assert.Len(t, a.Assignments(), 2, "failed requests change nothing: most and two")
}

// TestReservedNeverNil: every route of Allocate records Reserved as a set,
// empty when nothing is reserved, never the zero set (cpuset's Equals
// tells them apart): infra, shared, CPUs chosen by the kubelet, and a
// placement with and without reserved siblings.
func TestReservedNeverNil(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"4-7,12-15\"\npools: {shared: {cpus: \"4,12\"}}")
	exact := exclusive("exact", 1)
	exact.CPUs = cpuset.New(5)
	hide := exclusive("hide", 1)
	hide.Options.HideHyperthreads = true
	for _, req := range []Request{{ID: "infra1", Pool: pools.Infra}, {ID: "shared1", Pool: pools.Shared}, exact, exclusive("placed", 1), hide} {
		res, err := a.Allocate(req)
		require.NoError(t, err, req.ID)
		if req.ID == "hide" {
			assert.Equal(t, 1, res.Assignment.Reserved.Size(), "hide-hyperthreads reserves the sibling")
			continue
		}
		assert.True(t, res.Assignment.Reserved.Equals(cpuset.New()), "%s: Reserved %#v", req.ID, res.Assignment.Reserved)
	}
}

// TestInfraBudgetCountsReserved: minInfraCPUs counts what a placement
// reserves (the siblings hide-hyperthreads keeps idle) as taken from
// infra, as well as its CPUs: 3 CPUs leave infra 5 of its 8, but 3 with
// their siblings would leave 2, below the 3 it must keep.
func TestInfraBudgetCountsReserved(t *testing.T) {
	const cfg = "isolatedCPUs: \"4-7,12-15\"\nreservedCPUs: \"0,8\"\npools: {shared: {cpus: \"4,12\"}, exclusive: {cpus: \"5-7,13-15\"}, exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 3}}"
	for _, hide := range []bool{false, true} {
		a := newAllocator(t, "desktop-8c16t", cfg)
		_, err := a.Allocate(Request{ID: "infra1", Pool: pools.Infra})
		require.NoError(t, err)
		eni := exclusive("eni", 3)
		eni.Pool = pools.ExclusiveNonIsolcpus
		eni.Options.HideHyperthreads = hide
		_, err = a.Allocate(eni)
		if !hide {
			require.NoError(t, err)
			assert.Equal(t, 5, a.PoolCPUs(pools.Infra).Size())
			continue
		}
		assert.ErrorContains(t, err, "must keep 3", "its 3 siblings are reserved out of infra too")
	}
}

func TestSharedAndInfraFollowThePool(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"4-7,12-15\"\nreservedCPUs: \"0,8\"\npools: {shared: {cpus: \"4,12\"}, exclusive: {cpus: \"5-7,13-15\"}, exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 3}}")
	infra, err := a.Allocate(Request{ID: "infra1", Pool: pools.Infra})
	require.NoError(t, err)
	assert.Equal(t, "0-3,8-11", infra.Assignment.CPUs.String())
	assert.Equal(t, "0", infra.Assignment.Mems.String())
	shared, err := a.Allocate(Request{ID: "shared1", Pool: pools.Shared})
	require.NoError(t, err)
	assert.Equal(t, "4,12", shared.Assignment.CPUs.String())

	eni := exclusive("eni", 2)
	eni.Pool = pools.ExclusiveNonIsolcpus
	res, err := a.Allocate(eni)
	require.NoError(t, err)
	assert.True(t, res.Assignment.CPUs.Intersection(cpuset.New(0, 8)).IsEmpty(), "reserved CPUs are never lent")
	assert.True(t, res.InfraChanged)
	require.Len(t, res.Updates, 1)
	assert.Equal(t, "infra1", res.Updates[0].ID)
	assert.Equal(t, a.PoolCPUs(pools.Infra), res.Updates[0].CPUs)
	assert.True(t, res.Updates[0].CPUs.Intersection(res.Assignment.CPUs).IsEmpty())
	assert.Equal(t, 6, a.PoolCPUs(pools.Infra).Size())

	big := exclusive("eni2", 4)
	big.Pool = pools.ExclusiveNonIsolcpus
	_, err = a.Allocate(big)
	assert.ErrorContains(t, err, "must keep 3")

	rel := a.Release("eni")
	assert.True(t, rel.InfraChanged)
	require.Len(t, rel.Updates, 1)
	assert.Equal(t, "0-3,8-11", rel.Updates[0].CPUs.String())
}

func TestRestartGetsPreviousCPUs(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	first, err := a.Allocate(exclusive("a", 4))
	require.NoError(t, err)
	_, err = a.Allocate(exclusive("b", 2))
	require.NoError(t, err)
	a.Stop("a", exitCode(1))
	again := exclusive("a2", 4)
	again.Pod = first.Assignment.Pod
	res, err := a.Allocate(again)
	require.NoError(t, err)
	assert.Equal(t, first.Assignment.CPUs, res.Assignment.CPUs)
}

func TestRestore(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	_, err := a.restore(Assignment{ID: "a", Pool: pools.Exclusive, CPUs: set(t, "10,50")})
	require.NoError(t, err)
	_, err = a.restore(Assignment{ID: "b", Pool: pools.Exclusive, CPUs: set(t, "50,52")})
	assert.ErrorContains(t, err, "CPU 50 is already held by container a")
	_, err = a.restore(Assignment{ID: "c", Pool: pools.Exclusive, CPUs: set(t, "0")})
	assert.ErrorContains(t, err, "outside pool exclusive")
	_, ok := a.Get("c")
	assert.False(t, ok)
	_, err = a.keep(Assignment{ID: "c", Pool: pools.Exclusive, CPUs: set(t, "0")})
	assert.Error(t, err, "forced restores still report the problem")
	got, ok := a.Get("c")
	require.True(t, ok)
	assert.Equal(t, "0", got.CPUs.String(), "a running container is never moved")
	res, err := a.Allocate(exclusive("d", 76))
	assert.Error(t, err, "restored CPUs are held: %v", res.Assignment.CPUs)

	// Two containers forced onto the same CPUs: freeing one must not free
	// the CPUs the other still runs on.
	_, err = a.keep(Assignment{ID: "b", Pool: pools.Exclusive, CPUs: set(t, "50,52")})
	assert.ErrorContains(t, err, "already held by container a")
	a.Release("a")
	assert.False(t, a.FreeCPUs(pools.Exclusive).Contains(50), "b still runs on 50")
	assert.True(t, a.FreeCPUs(pools.Exclusive).Contains(10), "10 was a's alone")
	a.Release("b")
	assert.True(t, a.FreeCPUs(pools.Exclusive).Contains(50))
}

// TestDistributeRefusal: a spread that no set of nodes can hold is refused
// with each node's free CPUs.
func TestDistributeRefusal(t *testing.T) {
	topo := topology(t, "kubelet-dual-socket-multi-numa-ht")
	// Node 0 has 19 free CPUs, the others 1 each: 22 cannot be spread.
	ours, _ := kubeletPair(t, topo, set(t, "0-9,40-48,10,20,30"), "outside the pool")
	r := exclusive("x", 22)
	r.Options.DistributeAcrossNUMA = true
	_, err := ours.Allocate(r)
	assert.ErrorContains(t, err, "no set of nodes has room for equal shares (free CPUs by node: node 0: 19, node 1: 1, node 2: 1, node 3: 1)")
	r.Options.DistributeAcrossNUMA = false
	_, err = ours.Allocate(r)
	require.NoError(t, err, "without the option it fits")
}

// TestIssue11WholeCoreExamples pins the two examples of issue 11 exactly:
// CPUs whose siblings belong to another pool are not whole cores.
func TestIssue11WholeCoreExamples(t *testing.T) {
	for _, tc := range []struct{ free, want string }{
		{"0-3,6", "2,6"}, // 4, 5 and 7 in another pool: 0-1 would share two cores
		{"1,4,5", "1,5"},
	} {
		topo := topology(t, "kubelet-single-socket-ht")
		ours, _ := kubeletPair(t, topo, set(t, tc.free), "outside the pool")
		res, err := ours.Allocate(exclusive("x", 2))
		require.NoError(t, err)
		assert.Equal(t, tc.want, res.Assignment.CPUs.String(), "free %s", tc.free)
	}
}

// TestIssue20WholeCoresAndOneSocket pins the examples of issue 20: whole
// free cores before lone threads beside another pool, whichever node they
// are on, and one socket of a NUMA node that spans two when one holds the
// request.
func TestIssue20WholeCoresAndOneSocket(t *testing.T) {
	t.Run("whole cores of both nodes, not lone threads beside infra", func(t *testing.T) {
		// 0, 1 and 5 are infra: 6, 7 and 11 share a core with it.
		a := newAllocator(t, "kubelet-dual-socket-ht", "isolatedCPUs: \"0-11\"\npools: {exclusive: {cpus: \"2-4,6-11\"}}")
		res, err := a.Allocate(exclusive("x", 6))
		require.NoError(t, err)
		assert.Equal(t, "2-4,8-10", res.Assignment.CPUs.String(), "three whole cores, as the kubelet")
	})
	t.Run("one socket of a NUMA node that spans two", func(t *testing.T) {
		topo := topology(t, "epyc-2s-nps0")
		// Socket 1's L3 groups have 6 and 4 whole cores free, socket 0's 5.
		ours, _ := kubeletPair(t, topo, set(t, "32-37,96-101,40-43,104-107,0-4,64-68"), "outside the pool")
		res, err := ours.Allocate(exclusive("x", 20))
		require.NoError(t, err)
		assert.Equal(t, shape{numaNodes: 1, sockets: 1, cores: 10, l3Groups: 2}, measure(topo, res.Assignment.CPUs), "%s", res.Assignment.CPUs)
	})
	t.Run("one socket of a NUMA node that spans two, though both give fewer cores", func(t *testing.T) {
		// Only the socket rule decides here: socket 0 (cores 0-31, siblings
		// N and N+64) holds 10 CPUs in one L3 group as four whole cores and
		// two lone threads (68 and 69 are infra); with socket 1's whole
		// core 32, both sockets together would hold them in five whole
		// cores (in two L3 groups). Rule 3 comes before rule 4 inside a
		// NUMA node too, and no L3 choice stands in for it.
		topo := topology(t, "epyc-2s-nps0")
		ours, _ := kubeletPair(t, topo, set(t, "0-5,64-67,32,96"), "outside the pool")
		res, err := ours.Allocate(exclusive("x", 10))
		require.NoError(t, err)
		assert.Equal(t, "0-5,64-67", res.Assignment.CPUs.String())
		assert.Equal(t, shape{numaNodes: 1, sockets: 1, cores: 6, l3Groups: 1, splitCores: 2}, measure(topo, res.Assignment.CPUs), "%s", res.Assignment.CPUs)
	})
}

// TestFewerNUMANodesOutrankWholeCoresLeft is the one trade the comparison
// above leaves out on purpose: 5 CPUs where node 0 has only half cores and
// node 1 whole ones. The kubelet's packed algorithm takes two whole cores
// on node 1 and one CPU of node 0 (0,10-11,50-51: two NUMA nodes); rule 1
// keeps the container on one node and breaks a whole core there instead.
func TestFewerNUMANodesOutrankWholeCoresLeft(t *testing.T) {
	topo := topology(t, "kubelet-dual-socket-multi-numa-ht")
	ours, _ := kubeletPair(t, topo, set(t, "0-19,50-59"), "outside the pool")
	res, err := ours.Allocate(exclusive("x", 5))
	require.NoError(t, err)
	s := measure(topo, res.Assignment.CPUs)
	assert.Equal(t, 1, s.numaNodes, "%s", res.Assignment.CPUs)
	assert.Equal(t, 3, s.cores, "two whole cores and one more: %s", res.Assignment.CPUs)
	assert.True(t, res.Assignment.CPUs.IsSubsetOf(set(t, "10-19,50-59")))
}

// kubeletPair builds two allocators over the whole machine where only free
// is available: ours places, theirs records the kubelet's answer. how says
// why the other CPUs are unavailable.
func kubeletPair(t *testing.T, topo *sysfs.Topology, free cpuset.CPUSet, how string) (ours, theirs *Allocator) {
	t.Helper()
	all := topo.Online
	unavailable := all.Difference(free)
	held := unavailable
	if how != "held by a container" {
		held = cpuset.New()
		if how == "half held, half outside" {
			for i, id := range unavailable.List() {
				if i%2 == 0 {
					held = held.Union(cpuset.New(id))
				}
			}
		}
	}
	pool := free.Union(held)
	layout := &Layout{Online: all, Exclusive: pool, Shared: cpuset.New(), Infra: all.Difference(pool), ExclusiveNonIsolcpus: cpuset.New(), Reserved: cpuset.New()}
	ours, theirs = New(topo, layout, true), New(topo, layout, true)
	if !held.IsEmpty() {
		for _, a := range []*Allocator{ours, theirs} {
			_, err := a.restore(Assignment{ID: "taken", Pool: pools.Exclusive, CPUs: held})
			require.NoError(t, err)
		}
	}
	return ours, theirs
}

// TestRandomChurnInvariants runs random create/remove sequences on every
// fixture and checks the invariants after each step.
func TestRandomChurnInvariants(t *testing.T) {
	fixtures := map[string]string{
		"vm-2cpu":                 "isolatedCPUs: \"1\"",
		"desktop-8c16t":           "isolatedCPUs: \"2-7,10-15\"\npools: {shared: {count: 2}, exclusive: {count: 8}, exclusive-non-isolcpus: {enabled: true}}",
		"xeon-2s-interleaved":     "pools: {exclusive: {count: 60}, shared: {count: 8}, exclusive-non-isolcpus: {enabled: true}}",
		"xeon-2s-snc2":            "isolatedCPUs: \"4-39,44-79\"",
		"epyc-1s-nps4":            "isolatedCPUs: \"8-63,72-127\"\npools: {exclusive-non-isolcpus: {enabled: true}}",
		"epyc-2s-384":             "isolatedCPUs: \"2-191,194-383\"",
		"xeon-1s-nosmt":           "isolatedCPUs: \"2-15\"",
		"server-offline-isolcpus": "pools: {exclusive: {count: 6}, shared: {count: 4}}",
		// The big and sparse shapes (issue 33).
		"xeon-2s-gnr-snc3":   "isolatedCPUs: \"2-239,242-479\"\npools: {exclusive-non-isolcpus: {enabled: true}}",
		"epyc-2s-turin-nps4": "isolatedCPUs: \"2-383,386-767\"",
		"epyc-2s-1024":       "isolatedCPUs: \"2-511,514-1023\"",
		"sparse-4096":        "isolatedCPUs: \"2-47,1024-1029,1031-1055,2032-2047,2051-2095,3072-3077,3079-3103,4080-4094\"\npools: {shared: {count: 8}, exclusive-non-isolcpus: {enabled: true}}",
	}
	for name, cfg := range fixtures {
		t.Run(name, func(t *testing.T) {
			a := newAllocator(t, name, cfg)
			rng := rand.New(rand.NewSource(int64(len(name))))
			var live []string
			choices := []string{pools.Exclusive, pools.Exclusive, pools.Infra, pools.Shared, pools.ExclusiveNonIsolcpus}
			// The invariants are checked after every step and cost in
			// proportion to the CPUs: the shapes above 400 CPUs take
			// fewer steps, which still fill a node many times over.
			steps := 400
			if topology(t, name).Online.Size() > 400 {
				steps = 80
			}
			for step := 0; step < steps; step++ {
				if len(live) > 0 && rng.Intn(4) == 0 {
					// In-place resize of a live container.
					id := live[rng.Intn(len(live))]
					before, _ := a.Get(id)
					r := exclusive(id, 1+rng.Intn(6))
					r.Options.HideHyperthreads = before.Reserved.Size() > 0
					res, err := a.Resize(r)
					after, _ := a.Get(id)
					switch {
					case err != nil:
						require.Equal(t, before, after, "a refused resize changes nothing")
					case pools.IsExclusive(before.Pool):
						require.Equal(t, CPUsFor(r.MilliCPU), res.Assignment.CPUs.Size())
						require.True(t, before.Original().IsSubsetOf(after.CPUs), "the original set stays")
					default:
						require.Equal(t, before.CPUs, after.CPUs)
					}
				} else if len(live) > 0 && rng.Intn(3) == 0 {
					i := rng.Intn(len(live))
					a.Release(live[i])
					live = append(live[:i], live[i+1:]...)
				} else {
					r := exclusive(fmt.Sprintf("c%d", step), 1+rng.Intn(6))
					r.Pool = choices[rng.Intn(len(choices))]
					r.Options.HideHyperthreads = rng.Intn(8) == 0
					r.Options.DistributeAcrossNUMA = rng.Intn(8) == 0
					if res, err := a.Allocate(r); err == nil {
						live = append(live, r.ID)
						if pools.IsExclusive(r.Pool) {
							require.Equal(t, CPUsFor(r.MilliCPU), res.Assignment.CPUs.Size(), "size matches the request")
						}
					}
				}
				checkInvariants(t, a)
			}
		})
	}
}

func checkInvariants(t *testing.T, a *Allocator) {
	t.Helper()
	held := cpuset.New()
	for _, as := range a.Assignments() {
		switch as.Pool {
		case pools.Exclusive, pools.ExclusiveNonIsolcpus:
			require.True(t, held.Intersection(as.Held()).IsEmpty(), "CPUs %s given twice", held.Intersection(as.Held()))
			held = held.Union(as.Held())
			require.True(t, as.Held().IsSubsetOf(a.Layout().Pool(as.Pool)))
		default:
			require.Equal(t, a.PoolCPUs(as.Pool), as.CPUs, "%s follows its pool", as.ID)
		}
	}
	for _, h := range a.Holds() {
		require.True(t, held.Intersection(h.Held()).IsEmpty(), "held CPUs %s given to others", held.Intersection(h.Held()))
		held = held.Union(h.Held())
		require.True(t, h.Held().IsSubsetOf(a.Layout().Pool(h.Pool)))
		require.False(t, h.CPUs.IsEmpty(), "no empty hold")
	}
	for _, cpu := range held.List() {
		require.NotContains(t, a.FreeCPUs(pools.Exclusive).Union(a.FreeCPUs(pools.ExclusiveNonIsolcpus)).List(), cpu, "held CPU %d is not free", cpu)
	}
	l := a.Layout()
	exclusiveNow := l.Exclusive.Union(l.ExclusiveNonIsolcpus.Difference(a.PoolCPUs(pools.Infra)))
	require.True(t, exclusiveNow.Intersection(l.Shared).IsEmpty(), "exclusive ∩ shared = ∅")
	require.True(t, a.PoolCPUs(pools.Infra).Intersection(held).IsEmpty(), "infra never overlaps exclusive")
	require.Equal(t, l.Online, exclusiveNow.Union(l.Shared).Union(a.PoolCPUs(pools.Infra)), "pools add up to the online CPUs")
	require.GreaterOrEqual(t, a.PoolCPUs(pools.Infra).Size(), min(l.MinInfraCPUs, l.Infra.Size()))
	indexed := 0
	for uid, ids := range a.byPod {
		require.NotEmpty(t, ids, "no empty pod in the index")
		for id := range ids {
			require.Contains(t, a.containers, id, "indexed container %s exists", id)
			require.Equal(t, uid, a.containers[id].Pod.UID, "container %s indexed under its pod", id)
			indexed++
		}
	}
	require.Equal(t, len(a.containers), indexed, "every container indexed by its pod")
}

// TestRandomChurnWithHolds runs random pod lives: containers of a few pods
// are created, stopped with random exit codes, run again, and pods end; the
// invariants hold after each step and a container's next run always gets
// its CPUs back.
func TestRandomChurnWithHolds(t *testing.T) {
	for name, cfg := range map[string]string{
		"vm-2cpu":       "isolatedCPUs: \"1\"",
		"desktop-8c16t": "isolatedCPUs: \"2-7,10-15\"\npools: {shared: {count: 2}, exclusive: {count: 8}, exclusive-non-isolcpus: {enabled: true}}",
		"epyc-1s-nps4":  "isolatedCPUs: \"8-63,72-127\"\npools: {exclusive-non-isolcpus: {enabled: true}}",
		// Sparse ids with offline CPUs inside cores (issue 33).
		"sparse-4096": "isolatedCPUs: \"2-47,1024-1029,1031-1055,2032-2047,2051-2095,3072-3077,3079-3103,4080-4094\"\npools: {exclusive-non-isolcpus: {enabled: true}}",
	} {
		t.Run(name, func(t *testing.T) {
			a := newAllocator(t, name, cfg)
			rng := rand.New(rand.NewSource(int64(len(name))))
			choices := []string{pools.Exclusive, pools.Exclusive, pools.Infra, pools.ExclusiveNonIsolcpus}
			type ctr struct {
				req     Request
				running bool
				failed  bool
				cpus    cpuset.CPUSet
			}
			var ctrs []*ctr
			// The invariants after every step cost in proportion to the
			// CPUs: shapes above 128 CPUs take fewer steps.
			steps := 600
			if topology(t, name).Online.Size() > 128 {
				steps = 200
			}
			for step := 0; step < steps; step++ {
				switch op := rng.Intn(10); {
				case op < 4 || len(ctrs) == 0: // a new container, in one of 4 pods
					pod := rng.Intn(4)
					r := exclusive(fmt.Sprintf("c%d", step), 1+rng.Intn(3))
					r.Pod = PodRef{Namespace: "ns", Name: fmt.Sprint("pod", pod), UID: fmt.Sprint("uid", pod)}
					r.Container = fmt.Sprint("n", step)
					r.Pool = choices[rng.Intn(len(choices))]
					if res, err := a.Allocate(r); err == nil {
						ctrs = append(ctrs, &ctr{req: r, running: true, cpus: res.Assignment.CPUs})
					}
				case op < 7: // a stop
					c := ctrs[rng.Intn(len(ctrs))]
					if c.running {
						code := int32(rng.Intn(2))
						a.Stop(c.req.ID, &code)
						c.running, c.failed = false, code != 0
					}
				case op < 9: // the next run of a stopped container
					c := ctrs[rng.Intn(len(ctrs))]
					if c.running {
						break
					}
					next := c.req
					next.ID = fmt.Sprintf("%s-r%d", c.req.ID, step)
					res, err := a.Allocate(next)
					if c.failed && pools.IsExclusive(c.req.Pool) {
						require.NoError(t, err, "a failed container's next run always fits")
						require.Equal(t, c.cpus, res.Assignment.CPUs, "and gets its CPUs back")
					}
					if err == nil {
						c.req, c.running, c.cpus = next, true, res.Assignment.CPUs
					}
				default: // a pod ends
					uid := fmt.Sprint("uid", rng.Intn(4))
					a.ReleasePod(uid)
					kept := ctrs[:0]
					for _, c := range ctrs {
						if c.req.Pod.UID != uid {
							kept = append(kept, c)
						}
					}
					ctrs = kept
				}
				checkInvariants(t, a)
			}
		})
	}
}

func TestAdopt(t *testing.T) {
	a := newAllocator(t, "xeon-2s-interleaved", "")
	_, err := a.Allocate(exclusive("other", 2)) // takes 2,42
	require.NoError(t, err)

	res, how, err := a.Adopt(exclusive("ours", 2), set(t, "3,43"), cpuset.New())
	require.NoError(t, err)
	assert.Equal(t, StaysWhereItRuns, how, "a free set of the right size is our earlier decision: it stays")
	assert.Equal(t, "3,43", res.Assignment.CPUs.String())

	res, how, err = a.Adopt(exclusive("clash", 2), set(t, "2,42"), cpuset.New())
	require.NoError(t, err)
	assert.Equal(t, PlacedAsNew, how, "CPUs held by another container: placed anew")
	assert.True(t, res.Assignment.CPUs.Intersection(set(t, "2-3,42-43")).IsEmpty())

	res, how, err = a.Adopt(exclusive("wrongsize", 2), set(t, "0-79"), cpuset.New())
	require.NoError(t, err)
	assert.Equal(t, PlacedAsNew, how, "an unpinned container is placed")
	assert.Equal(t, 2, res.Assignment.CPUs.Size())
}

// TestRestoreMovesMembersOfAVanishedPoolToInfra: a restart with a config
// that gives the shared pool no CPU hands its old CPUs to another pool
// (here the exclusive pool, which is every isolated CPU). Its member is
// never left there, where the next exclusive container would be given
// them: it runs on infra, as while every shared CPU is offline, and the
// error says why (a reload refuses it: Relayout).
func TestRestoreMovesMembersOfAVanishedPoolToInfra(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"")
	require.True(t, a.Layout().Pool(pools.Exclusive).Contains(2), "the old shared CPUs are exclusive now")
	res, err := a.keep(Assignment{ID: "s", Pool: pools.Shared, CPUs: set(t, "2,10")})
	assert.EqualError(t, err, "container s: pool shared has no CPUs as now configured; it runs on pool infra (0-1,8-9) instead of 2,10")
	assert.Equal(t, "0-1,8-9", res.Assignment.CPUs.String(), "on infra, never on CPUs another pool hands out")
	next, err := a.Allocate(exclusive("next", 12))
	require.NoError(t, err)
	assert.True(t, next.Assignment.CPUs.Intersection(res.Assignment.CPUs).IsEmpty())
}

// TestPlacementRulesOnEveryFixture checks the rules on every machine shape
// with an empty pool: a request that one NUMA node can hold uses one node;
// a request of whole cores splits none; a request one L3 group can hold
// uses one group; and the devices' node is chosen when it can hold it.
func TestPlacementRulesOnEveryFixture(t *testing.T) {
	for _, name := range fixture.Names(t) {
		t.Run(name, func(t *testing.T) {
			topo := topology(t, name)
			// Every online CPU but CPU 0's core is exclusive.
			cpu0, _ := topo.CPU(0)
			pool := topo.Online.Difference(cpu0.Siblings)
			if pool.IsEmpty() {
				t.Skip("no CPU left for an exclusive pool")
			}
			cfg := fmt.Sprintf("pools: {exclusive: {cpus: %q}}", pool.String())
			x := newIndex(topo)
			minNode, minL3 := pool.Size(), pool.Size()
			for _, n := range topo.NUMANodes {
				if c := n.CPUs.Intersection(pool).Size(); c > 0 {
					minNode = min(minNode, c)
				}
			}
			for _, g := range topo.L3Groups() {
				if c := topo.CPUsWhere(func(c sysfs.CPU) bool { return c.L3 == g }).Intersection(pool).Size(); c > 0 {
					minL3 = min(minL3, c)
				}
			}
			// One allocator, emptied after each size: building the layout
			// of a 1,024-CPU shape again for every size costs more than
			// the decisions.
			a := newAllocator(t, name, cfg)
			for _, n := range placementSizes(pool.Size(), minNode, minL3, x.threadsPerCore) {
				res, err := a.Allocate(exclusive("x", n))
				require.NoError(t, err, "%d CPUs", n)
				s := measure(topo, res.Assignment.CPUs)
				require.Equal(t, n, res.Assignment.CPUs.Size())
				if n <= minNode {
					assert.Equal(t, 1, s.numaNodes, "%d CPUs fit one NUMA node: %s", n, res.Assignment.CPUs)
				}
				if n <= minL3 {
					assert.Equal(t, 1, s.l3Groups, "%d CPUs fit one L3 group: %s", n, res.Assignment.CPUs)
				}
				if n%x.threadsPerCore == 0 && n <= minNode {
					assert.Equal(t, 0, s.splitCores, "%d CPUs are whole cores: %s", n, res.Assignment.CPUs)
				}
				a.Release("x")
				require.Equal(t, pool, a.PoolCPUs(pools.Exclusive), "the pool is whole again after a release")
			}
			if len(topo.NUMANodes) > 1 {
				last := topo.NUMANodes[len(topo.NUMANodes)-1]
				a := newAllocator(t, name, cfg)
				r := exclusive("dev", 2)
				r.PreferNUMA = cpuset.New(last.ID)
				res, err := a.Allocate(r)
				require.NoError(t, err)
				assert.True(t, res.Assignment.CPUs.IsSubsetOf(last.CPUs), "device on node %d: got %s", last.ID, res.Assignment.CPUs)
			}
		})
	}
}

// placementSizes are the request sizes TestPlacementRulesOnEveryFixture
// tries on a pool: every size up to 512 CPUs; above, where each decision
// costs milliseconds under -race, every size to 64, a few either side of
// the multiples of the smallest L3 group (up to a node and one group more,
// where the L3 rule applies) and of the smallest NUMA node, and every
// 61st, which keeps a 1,024-CPU shape near a second.
func placementSizes(pool, minNode, minL3, tpc int) []int {
	if pool <= 512 {
		sizes := make([]int, pool)
		for i := range sizes {
			sizes[i] = i + 1
		}
		return sizes
	}
	set := map[int]bool{pool: true}
	for n := 1; n <= 64; n++ {
		set[n] = true
	}
	for _, u := range []struct{ unit, upTo int }{{minL3, minNode + minL3}, {minNode, pool}} {
		for m := u.unit; m <= u.upTo; m += u.unit {
			for d := -tpc; d <= tpc; d++ {
				set[m+d] = true
			}
		}
	}
	for n := 1; n <= pool; n += 61 {
		set[n] = true
	}
	var sizes []int
	for n := range set {
		if n >= 1 && n <= pool {
			sizes = append(sizes, n)
		}
	}
	sort.Ints(sizes)
	return sizes
}

func TestRestartCannotBypassInfraMinimum(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0\"\npools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 2}}")
	_, err := a.restore(Assignment{ID: "b", Pool: pools.ExclusiveNonIsolcpus, CPUs: set(t, "1")})
	require.NoError(t, err)
	r := exclusive("a", 1)
	r.Pool = pools.ExclusiveNonIsolcpus
	first, err := a.Allocate(r)
	require.NoError(t, err)
	// 8 and 9 are both half cores (0 is reserved infra, 1 is b's): the
	// first of them.
	require.Equal(t, "8", first.Assignment.CPUs.String())
	a.Stop("a", exitCode(1))
	require.Equal(t, "0,9", a.PoolCPUs(pools.Infra).String(), "the hold keeps infra shrunk")
	again := r
	again.ID, again.MilliCPU = "a2", 2000 // resized: its own CPU and one more
	_, err = a.Allocate(again)
	assert.ErrorContains(t, err, "infra (0,9) must keep 2", "a restart does not bypass minInfraCPUs")
	again.MilliCPU = 1000
	res, err := a.Allocate(again)
	require.NoError(t, err, "the held CPU does not count against infra again")
	assert.Equal(t, "8", res.Assignment.CPUs.String())
}

// TestRankingOrder pits each placement rule against the next one and
// checks that the higher rule wins (docs/placement.md).
func TestRankingOrder(t *testing.T) {
	// The comparator itself: a plan better on one figure wins over a plan
	// better on every later figure.
	fields := []func(*plan) *int{
		func(p *plan) *int { return &p.homeMisses },
		func(p *plan) *int { return &p.hintMisses },
		func(p *plan) *int { return &p.sockets },
		func(p *plan) *int { return &p.distance },
		func(p *plan) *int { return &p.cores },
		func(p *plan) *int { return &p.wholeCores },
		func(p *plan) *int { return &p.l3Groups },
		func(p *plan) *int { return &p.leftover },
	}
	for i := range fields {
		winner, loser := &plan{nodes: []int{1}}, &plan{nodes: []int{0}}
		*fields[i](loser) = 1
		for _, later := range fields[i+1:] {
			*later(winner) = 5
		}
		assert.True(t, winner.better(loser), "figure %d outranks the later ones", i)
		assert.False(t, loser.better(winner), "figure %d outranks the later ones", i)
	}

	mc := "kubelet-dual-socket-multi-numa-ht" // nodes 0,1 on socket 0, 2,3 on socket 1; siblings N and N+40
	// Node 0 spans sockets 0 (0-9,40-49) and 1 (10-19,50-59); node 1 sockets 2 and 3.
	spanning := "kubelet-multi-socket-dual-socket-per-numa-ht"
	tests := []struct {
		name, fixture, free string
		n                   int
		device              int // -1: none
		within              string
		shape               *shape
	}{
		// 1 > 2: node 1 (the device's) has 2 free CPUs, node 0 all of its.
		{name: "fewest NUMA nodes over device locality", fixture: mc, free: "0-10,40-49,50", n: 4, device: 1, within: "0-9,40-49"},
		// 2 > 3: node 3 is full; the pair on one socket has no device.
		{name: "device locality over fewest sockets", fixture: mc, free: "0-29,40-69", n: 24, device: 2, within: "0-9,20-29,40-49,60-69",
			shape: &shape{numaNodes: 2, sockets: 2, cores: 12, l3Groups: 2}},
		// 2 > 4: the device's node has only half cores left.
		{name: "device locality over whole cores", fixture: mc, free: "0-9,40-49,10-19", n: 4, device: 1, within: "10-19"},
		// 3 > 4: socket 0's nodes have only half cores, node 2 whole ones, node 3 none.
		{name: "fewest sockets over whole cores", fixture: mc, free: "0-19,20-24,60-64", n: 14, device: -1, within: "0-19",
			shape: &shape{numaNodes: 2, sockets: 1, cores: 14, l3Groups: 1, splitCores: 14}},
		// 3 > 4, sockets counted inside NUMA nodes: node 0 holds 4 CPUs on
		// one socket in 3 cores, node 1 in 2 whole cores on two sockets.
		{name: "fewest sockets over whole cores, nodes spanning sockets", fixture: spanning, free: "0-2,40,20,60,30,70", n: 4, device: -1, within: "0-2,40",
			shape: &shape{numaNodes: 1, sockets: 1, cores: 3, l3Groups: 1, splitCores: 2}},
		// The same inside one node: each socket of node 0 has one whole
		// core and two lone threads; one socket holds 4 CPUs in 3 cores,
		// both in 2 whole cores.
		{name: "fewest sockets over whole cores, inside a NUMA node", fixture: spanning, free: "0-2,40,10-12,50", n: 4, device: -1, within: "0-2,40",
			shape: &shape{numaNodes: 1, sockets: 1, cores: 3, l3Groups: 1, splitCores: 2}},
		// 4: fewest cores over fewest whole cores taken: two CPUs are node
		// 0's whole core, not node 1's two lone threads (50, 51 held).
		{name: "fewest cores over fewest whole cores taken", fixture: mc, free: "0,40,10,11", n: 2, device: -1, within: "0,40"},
		// 4 > 5: three CPUs are node 1's whole core and a lone thread in
		// another L3 group (88 held), rather than breaking one of node 0's
		// two whole cores in one group.
		{name: "fewest whole cores taken over fewest L3 groups", fixture: "epyc-1s-nps4", free: "0,1,64,65,16,80,24", n: 3, device: -1, within: "16,24,80",
			shape: &shape{numaNodes: 1, sockets: 1, cores: 2, l3Groups: 2, splitCores: 1}},
		// 4 > 5: on node 0 of the EPYC (L3 groups of cores 0-7 and 8-15,
		// siblings N and N+64), one group holds 4 CPUs only with half cores.
		{name: "whole cores over fewest L3 groups", fixture: "epyc-1s-nps4", free: "0-6,70,8,72", n: 4, device: -1, within: "6,8,70,72",
			shape: &shape{numaNodes: 1, sockets: 1, cores: 2, l3Groups: 2}},
		// 5 > 6: node 0 fits 8 exactly but over two L3 groups; node 1 has
		// room to spare in one group.
		{name: "fewest L3 groups over best fit", fixture: "epyc-1s-nps4", free: "0-1,64-65,8-9,72-73,16-31,80-95", n: 8, device: -1, within: "16-31,80-95",
			shape: &shape{numaNodes: 1, sockets: 1, cores: 4, l3Groups: 1}},
		// 5: two L3 groups when two reach the figures (two whole cores and
		// a lone thread: 24-25 and 16, whose sibling 208 is held), though
		// whole cores of other groups come first in the pool.
		{name: "fewest L3 groups, two when two do", fixture: "kubelet-dual-socket-smt-uncore", free: "0,192,8,200,16,24,216,25,217", n: 5, device: -1,
			within: "16,24-25,216-217", shape: &shape{numaNodes: 1, sockets: 1, cores: 3, l3Groups: 2, splitCores: 1}},
		// 6: the fuller node.
		{name: "best fit over lowest node id", fixture: mc, free: "0-9,40-49,10-13,50-53", n: 4, device: -1, within: "10-13,50-53"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			topo := topology(t, tc.fixture)
			a, _ := kubeletPair(t, topo, set(t, tc.free), "held by a container")
			r := exclusive("x", tc.n)
			if tc.device >= 0 {
				r.PreferNUMA = cpuset.New(tc.device)
			}
			res, err := a.Allocate(r)
			require.NoError(t, err)
			got := res.Assignment.CPUs
			assert.True(t, got.IsSubsetOf(set(t, tc.within)), "got %s, want within %s", got, tc.within)
			if tc.shape != nil {
				assert.Equal(t, *tc.shape, measure(topo, got), "placement %s", got)
			}
		})
	}
}

// TestTakeRankingOrder is TestRankingOrder's comparator check for take:
// inside a plan's nodes, the sets of the fewest sockets that hold the
// request are weighed by pick.better, on cores touched, then whole cores
// taken, then L3 groups, then the least room in the sockets (rules 4 to 6
// inside the nodes). A set better on one figure wins over a set better on
// every later figure, so swapping any two of them fails.
func TestTakeRankingOrder(t *testing.T) {
	type socketSet struct {
		pk   pick
		room int
	}
	fields := []func(*socketSet) *int{
		func(s *socketSet) *int { return &s.pk.cores },
		func(s *socketSet) *int { return &s.pk.whole },
		func(s *socketSet) *int { return &s.pk.l3Groups },
		func(s *socketSet) *int { return &s.room },
	}
	for i := range fields {
		var winner, loser socketSet
		*fields[i](&loser) = 1
		for _, later := range fields[i+1:] {
			*later(&winner) = 5
		}
		assert.True(t, winner.pk.better(&loser.pk, winner.room, loser.room), "take: figure %d outranks the later ones", i)
		assert.False(t, loser.pk.better(&winner.pk, loser.room, winner.room), "take: figure %d outranks the later ones", i)
	}
	tie := socketSet{pk: pick{cores: 2, whole: 1, l3Groups: 1}, room: 4}
	assert.False(t, tie.pk.better(&tie.pk, tie.room, tie.room), "take: the first set wins a tie")
}

// TestFreeText: the refusal's count of free CPUs, singular for one, and
// without an empty list when none is free (review 59b, L1).
func TestFreeText(t *testing.T) {
	for _, tc := range []struct {
		free string
		size int
		want string
	}{
		{"", 0, "the pool has no CPUs"},
		{"", 1, "none of the pool's 1 CPU is free"},
		{"", 8, "none of the pool's 8 CPUs are free"},
		{"7", 8, `only 1 of the pool's 8 CPUs is free (free: "7")`},
		{"6,14", 8, `only 2 of the pool's 8 CPUs are free (free: "6,14")`},
	} {
		assert.Equal(t, tc.want, freeText(set(t, tc.free), tc.size))
	}
}
