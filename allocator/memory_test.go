package allocator

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

const (
	kb2M = 2048
	kb1G = 1048576
	gib  = int64(1) << 30
)

// hugeNow is a live hugepage reading: by node, the pages of one size.
func hugeNow(sizeKB int64, byNode map[int][2]int64) map[int][]sysfs.HugePages {
	out := map[int][]sysfs.HugePages{}
	for n, tf := range byNode {
		out[n] = []sysfs.HugePages{{SizeKB: sizeKB, Total: tf[0], Free: tf[1]}}
	}
	return out
}

// withMemory is an exclusive request that asks for memory.
func withMemory(id string, cpus int, memory int64, pages ...numamem.Pages) Request {
	r := exclusive(id, cpus)
	r.Demand = numamem.Demand{Memory: memory, HugePages: pages}
	return r
}

// TestMemoryFollowsCPUs is rule 0 of docs/placement.md over named
// topologies: an exclusive container's CPUs go to a NUMA node where its
// CPUs, hugepages and memory all fit; the fewest nodes when none can alone,
// with mems covering every node its hugepages come from; refused, with
// what each node has, when the node as a whole cannot hold its hugepages.
func TestMemoryFollowsCPUs(t *testing.T) {
	type step struct {
		req  Request
		now  map[int][]sysfs.HugePages
		cpus string // the CPUs' NUMA nodes
		mems string
		err  string
		warn string
	}
	cases := []struct {
		name, fixture, config string
		steps                 []step
	}{
		{
			// Without rule 0 the first container goes to node 0, the best
			// fit, and its mmap(MAP_HUGETLB) fails: the VM test of issue 31.
			name: "hugepages only on node1", fixture: "vm-2numa-hugepages", config: `pools: {exclusive: {cpus: "1-3"}}`,
			steps: []step{
				{req: withMemory("a", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16}), cpus: "1", mems: "1"},
				{req: withMemory("b", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16}), cpus: "1", mems: "1"},
				{req: withMemory("c", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16}), err: "hugepages-2Mi: asked 16, free node0 0 node1 0"},
				{req: exclusive("d", 1), cpus: "0", mems: "0"},
			},
		},
		{
			name: "node1's CPUs are taken: CPUs on node0, mems on both", fixture: "vm-2numa-hugepages", config: `pools: {exclusive: {cpus: "1-3"}}`,
			steps: []step{
				{req: exclusive("full", 2), cpus: "1", mems: "1"},
				{req: withMemory("a", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 32}), cpus: "0", mems: "0-1"},
			},
		},
		{
			name: "pages taken by something the plugin does not know are not free", fixture: "vm-2numa-hugepages", config: `pools: {exclusive: {cpus: "1-3"}}`,
			steps: []step{
				{req: withMemory("a", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 8}), now: hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, 20}}), cpus: "1", mems: "1"},
				// 32 − 8 held = 24, but only 20 are free: a host process
				// took 12 (the container's 8 are not faulted in yet).
				{req: withMemory("b", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 21}), err: "hugepages-2Mi: asked 21, free node0 0 node1 20"},
				// Once the container faulted its 8 in, 12 are free: its
				// pages are not counted twice.
				{req: withMemory("c", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 13}), now: hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {32, 12}}), err: "free node0 0 node1 12"},
				{req: withMemory("d", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 12}), cpus: "1", mems: "1"},
			},
		},
		{
			name: "the host's reserve", fixture: "vm-2numa-hugepages", config: "pools: {exclusive: {cpus: \"1-3\"}}\nmemory: {reservedHugePagesPerNode: {2Mi: 20}}",
			steps: []step{
				{req: withMemory("a", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 13}), err: "hugepages-2Mi: asked 13, free node0 0 node1 12"},
				{req: withMemory("b", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 12}), cpus: "1", mems: "1"},
			},
		},
		{
			name: "fewest nodes when no node holds the hugepages", fixture: "xeon-2s-snc2", config: `pools: {exclusive: {cpus: "2-39,42-79"}}`,
			steps: []step{
				{req: withMemory("a", 4, 0, numamem.Pages{SizeKB: kb1G, Count: 6}), now: hugeNow(kb1G, map[int][2]int64{0: {0, 0}, 1: {4, 4}, 2: {0, 0}, 3: {4, 4}}), cpus: "1", mems: "1,3"},
				// a took node 1's 4 pages and 2 of node 3's.
				{req: withMemory("b", 4, 0, numamem.Pages{SizeKB: kb1G, Count: 1}), cpus: "3", mems: "3"},
				{req: withMemory("c", 4, 0, numamem.Pages{SizeKB: kb1G, Count: 2}), err: "hugepages-1Gi: asked 2, free node0 0 node1 0 node2 0 node3 1"},
			},
		},
		{
			// MemTotal is 4 GiB a node, node 1's 32 pages of 2 MiB are
			// part of it: 4 GiB − 64 MiB there.
			name: "memory limits: the node with the memory", fixture: "vm-2numa-hugepages", config: `pools: {exclusive: {cpus: "1-3"}}`,
			steps: []step{
				{req: withMemory("a", 1, 3*gib), cpus: "0", mems: "0"},
				{req: withMemory("b", 1, 2*gib), cpus: "1", mems: "1"},
				{req: withMemory("c", 1, 2*gib-64<<20), cpus: "1", mems: "1"},
			},
		},
		{
			name: "memory limit no set of nodes holds: placed, with a warning", fixture: "vm-2numa-hugepages", config: "pools: {exclusive: {cpus: \"1-3\"}}\nmemory: {reservedPerNode: 1Gi}",
			steps: []step{
				{req: withMemory("a", 1, 8*gib), cpus: "0", mems: "0", warn: "memory: asked 8Gi, free node0 3Gi node1 3008Mi"},
			},
		},
		{
			name: "the devices' node among those with the memory", fixture: "xeon-2s-snc2", config: `pools: {exclusive: {cpus: "2-39,42-79"}}`,
			steps: []step{
				{req: func() Request {
					r := withMemory("a", 2, 0, numamem.Pages{SizeKB: kb2M, Count: 4})
					r.PreferNUMA = cpuset.New(1)
					return r
				}(), now: hugeNow(kb2M, map[int][2]int64{0: {0, 0}, 1: {8, 8}, 2: {8, 8}, 3: {0, 0}}), cpus: "1", mems: "1"},
				// Its device's node 0 has no hugepages, node 1 has 4 left:
				// node 2, though node 1 is the best fit and on its socket.
				{req: func() Request {
					r := withMemory("b", 2, 0, numamem.Pages{SizeKB: kb2M, Count: 5})
					r.PreferNUMA = cpuset.New(0)
					return r
				}(), cpus: "2", mems: "2"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAllocator(t, tc.fixture, tc.config)
			for i, s := range tc.steps {
				s.req.HugePagesNow = s.now
				res, err := a.Allocate(s.req)
				if s.err != "" {
					require.Error(t, err, "step %d", i)
					assert.Contains(t, err.Error(), s.err, "step %d", i)
					continue
				}
				require.NoError(t, err, "step %d", i)
				assert.Equal(t, s.cpus, a.x.numaNodesOf(res.Assignment.CPUs).String(), "step %d: the CPUs' nodes", i)
				assert.Equal(t, s.mems, res.Assignment.Mems.String(), "step %d: mems", i)
				if s.warn != "" {
					assert.Contains(t, res.Warning, s.warn, "step %d", i)
				} else {
					assert.Empty(t, res.Warning, "step %d", i)
				}
				assert.True(t, numamem.DemandOf(res.Assignment.Memory).Equal(s.req.Demand), "step %d: holds what it asked: %v", i, res.Assignment.Memory)
				checkMemoryAccount(t, a)
			}
		})
	}
}

// TestHugePageRefusalMessage is the refusal's exact form, which the VM
// test greps for: per size named the Kubernetes way, counts in pages,
// nodes in id order, with what to change.
func TestHugePageRefusalMessage(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	_, err := a.Allocate(withMemory("a", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 16}, numamem.Pages{SizeKB: kb1G, Count: 4}))
	require.Error(t, err)
	assert.Equal(t, "pool exclusive cannot fit container ns/pod-a/c: hugepages-1Gi: asked 4, free node0 0 node1 0; "+
		"reserve hugepages on a NUMA node of the pool (nodeN/hugepages/hugepages-<size>kB/nr_hugepages, or hugepagesz= and hugepages= on the kernel command line), "+
		"wait for the pods that hold them to end, or lower the container's hugepages limit", err.Error())
	assert.Equal(t, ReasonPlacement, ReasonOf(err))
	assert.Empty(t, a.MemoryUse(), "a refusal holds nothing")
}

// TestMemoryNotCountedUnlessPinned: shared and infra containers keep
// today's rules, and without pinMemory nothing is confined to a node.
func TestMemoryNotCountedUnlessPinned(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", "pools: {exclusive: {cpus: \"1-3\"}}\npinMemory: false")
	res, err := a.Allocate(withMemory("a", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 64}))
	require.NoError(t, err)
	assert.Equal(t, "1", res.Assignment.CPUs.String(), "today's rules")
	assert.Empty(t, a.MemoryUse())

	a = newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	sh := withMemory("s", 0, 0, numamem.Pages{SizeKB: kb2M, Count: 64})
	sh.Pool = pools.Infra
	_, err = a.Allocate(sh)
	require.NoError(t, err)
	assert.Empty(t, a.MemoryUse())
}

// TestMemoryHeldThroughThePodsLife: a stopped container's memory stays
// held for its next run, which gets it back; a completed container's goes
// to the pod's next container; the pod's end gives it all back.
func TestMemoryHeldThroughThePodsLife(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	run1 := withMemory("run1", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 32})
	_, err := a.Allocate(run1)
	require.NoError(t, err)
	failed := int32(1)
	a.Stop("run1", &failed)
	assert.Equal(t, []numamem.NodeMemoryUse{{Node: 1, HugePages: map[int64]int64{kb2M: 32}}}, a.MemoryUse(), "held while stopped")

	other := withMemory("other", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 1})
	_, err = a.Allocate(other)
	require.ErrorContains(t, err, "free node0 0 node1 0", "another pod may not have them")

	run2 := run1
	run2.ID = "run2"
	res, err := a.Allocate(run2)
	require.NoError(t, err, "the next run gets its pages back")
	assert.Equal(t, "1", res.Assignment.Mems.String())
	assert.Equal(t, []numamem.NodeMemoryUse{{Node: 1, HugePages: map[int64]int64{kb2M: 32}}}, a.MemoryUse(), "once")

	ok := int32(0)
	a.Stop("run2", &ok) // completed, like an init container
	app := withMemory("app", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 32})
	app.Pod, app.Container = run1.Pod, "app"
	_, err = a.Allocate(app)
	require.NoError(t, err, "a completed container's pages go to the pod's next container")
	assert.Equal(t, []numamem.NodeMemoryUse{{Node: 1, HugePages: map[int64]int64{kb2M: 32}}}, a.MemoryUse())
	checkMemoryAccount(t, a)

	a.ReleasePod(run1.Pod.UID)
	assert.Empty(t, a.MemoryUse())
}

// TestMemoryAccountProperty: over random creations, stops, removals, pod
// ends and restarts of the allocator (the records carried over as a
// restart reads them), no node's count goes negative, none counts a page
// twice (each node's count is the sum of what containers and holds hold),
// and no node's hugepages are handed out beyond what it has.
func TestMemoryAccountProperty(t *testing.T) {
	const cfg = `pools: {exclusive: {cpus: "2-39,42-79"}}`
	now := hugeNow(kb2M, map[int][2]int64{0: {8, 8}, 1: {16, 16}, 2: {0, 0}, 3: {24, 24}})
	for seed := int64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewSource(seed))
		a := newAllocator(t, "xeon-2s-snc2", cfg)
		var live []string
		counted := false
		for step := 0; step < 120; step++ {
			switch op := rng.Intn(10); {
			case op < 5:
				pod := rng.Intn(6)
				r := withMemory(fmt.Sprintf("c%d-%d", seed, step), 1+rng.Intn(6), int64(rng.Intn(4))*gib, numamem.Pages{SizeKB: kb2M, Count: int64(rng.Intn(12))})
				if r.Demand.HugePages[0].Count == 0 {
					r.Demand.HugePages = nil
				}
				r.Pod = PodRef{Namespace: "ns", Name: fmt.Sprint("p", pod), UID: fmt.Sprint("uid", pod)}
				r.Container = fmt.Sprint("c", rng.Intn(3))
				r.HugePagesNow = now
				if running(a, r.Pod.UID, r.Container) {
					continue // the kubelet runs one instance of a container
				}
				if _, err := a.Allocate(r); err == nil {
					live = append(live, r.ID)
				}
			case op < 7 && len(live) > 0:
				i := rng.Intn(len(live))
				code := int32(rng.Intn(2))
				a.Stop(live[i], &code)
				live = append(live[:i], live[i+1:]...)
			case op < 8 && len(live) > 0:
				i := rng.Intn(len(live))
				a.Release(live[i])
				live = append(live[:i], live[i+1:]...)
			case op < 9:
				uid := fmt.Sprint("uid", rng.Intn(6))
				released, _ := a.ReleasePod(uid)
				for _, c := range released {
					for i, id := range live {
						if id == c.ID {
							live = append(live[:i], live[i+1:]...)
							break
						}
					}
				}
			default:
				// kill -9 and a restart: a new allocator takes back what
				// the records say, containers where they run, then holds.
				b := New(a.x.topo, a.layout, true)
				for _, as := range a.Assignments() {
					_, _, err := b.Readmit(Remembered{Assignment: as, RunsOn: as.CPUs})
					require.NoError(t, err)
				}
				for _, h := range a.Holds() {
					_, err := b.RestoreHold(h)
					require.NoError(t, err)
				}
				require.Equal(t, a.MemoryUse(), b.MemoryUse(), "seed %d step %d: a restart counts the same", seed, step)
				a = b
			}
			checkMemoryAccount(t, a)
			counted = counted || len(a.MemoryUse()) > 0
			for _, u := range a.MemoryUse() {
				var total int64
				for _, hp := range now[u.Node] {
					total = hp.Total
				}
				require.LessOrEqual(t, u.HugePages[kb2M], total, "seed %d step %d: node %d's pages handed out beyond what it has", seed, step, u.Node)
			}
		}
		require.True(t, counted, "seed %d: nothing was ever counted", seed)
	}
}

func running(a *Allocator, uid, name string) bool {
	for _, c := range a.containers {
		if c.Pod.UID == uid && c.Container == name {
			return true
		}
	}
	return false
}

// checkMemoryAccount checks the running counts against what the
// containers and holds hold: never negative, never a holding twice.
func checkMemoryAccount(t *testing.T, a *Allocator) {
	t.Helper()
	type nodeUse struct {
		memory int64
		pages  map[int64]int64
	}
	want := map[int]*nodeUse{}
	add := func(held []numamem.NodeMemory) {
		for _, nm := range held {
			u := want[nm.Node]
			if u == nil {
				u = &nodeUse{pages: map[int64]int64{}}
				want[nm.Node] = u
			}
			u.memory += nm.Memory
			for _, p := range nm.HugePages {
				u.pages[p.SizeKB] += p.Count
			}
		}
	}
	for _, c := range a.containers {
		add(c.Memory)
	}
	for _, h := range a.holds {
		add(h.Memory)
	}
	require.NoError(t, a.mem.Verify())
	counts := a.mem.Counts()
	for n, u := range counts {
		require.GreaterOrEqual(t, u.Memory, int64(0), "node %d memory", n)
		w := want[n]
		if w == nil {
			w = &nodeUse{pages: map[int64]int64{}}
		}
		require.Equal(t, w.memory, u.Memory, "node %d memory", n)
		for size, c := range u.HugePages {
			require.GreaterOrEqual(t, c, int64(0), "node %d pages of %d kB", n, size)
			require.Equal(t, w.pages[size], c, "node %d pages of %d kB", n, size)
		}
	}
	for n, w := range want {
		require.Less(t, n, len(counts), "node %d counted", n)
		for size, c := range w.pages {
			require.Equal(t, c, counts[n].HugePages[size], "node %d pages of %d kB", n, size)
		}
	}
}
