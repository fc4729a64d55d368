package allocator

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// liveNode is a node's 2 MiB pool as the kernel shows it now.
type liveNode struct{ total, free int64 }

// fakeSysfs is the hugepage counts a HugePageReader reads: what the
// kernel says now, which the allocator's last reading may not be. It
// records the nodes each read asked for.
type fakeSysfs struct {
	now   map[int]liveNode
	seq   uint64
	reads [][]int
	fail  bool
}

func (f *fakeSysfs) read(nodes []int, sizesKB []int64) map[int][]sysfs.HugePages {
	f.reads = append(f.reads, slices.Clone(nodes))
	if f.fail {
		return nil
	}
	f.seq++
	out := map[int][]sysfs.HugePages{}
	for _, n := range nodes {
		for _, size := range sizesKB {
			if size == kb2M {
				out[n] = append(out[n], sysfs.HugePages{SizeKB: kb2M, Total: f.now[n].total, Free: f.now[n].free, Seq: f.seq})
			}
		}
	}
	return out
}

// snc2Nodes is xeon-2s-snc2's NUMA nodes, each with 16 free pages.
func snc2Nodes() map[int]liveNode {
	return map[int]liveNode{0: {16, 16}, 1: {16, 16}, 2: {16, 16}, 3: {16, 16}}
}

const snc2Exclusive = `pools: {exclusive: {cpus: "2-39,42-79"}}`

// primed is an allocator that last read the counts given (at a decision
// that read every node).
func primed(t *testing.T, fs *fakeSysfs) *Allocator {
	t.Helper()
	a := newAllocator(t, "xeon-2s-snc2", snc2Exclusive)
	r := withMemory("primer", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 1})
	r.HugePagesNow = fs.read(a.mem.MemoryNodes(), []int64{kb2M})
	_, err := a.Allocate(r)
	require.NoError(t, err)
	a.Release("primer")
	fs.reads = nil
	return a
}

// TestADecisionReadsOnlyTheNodeItChooses: when the counts last read let
// every node hold the container, only the node it is placed on is read
// again (2 files, not 2 per node), and it is placed there.
func TestADecisionReadsOnlyTheNodeItChooses(t *testing.T) {
	fs := &fakeSysfs{now: snc2Nodes()}
	a := primed(t, fs)
	r := withMemory("a", 2, 0, numamem.Pages{SizeKB: kb2M, Count: 4})
	r.ReadHugePages = fs.read
	res, err := a.Allocate(r)
	require.NoError(t, err)
	mems := res.Assignment.Mems.List()
	require.Len(t, mems, 1)
	assert.Equal(t, [][]int{mems}, fs.reads, "one read, of the node chosen")
	assert.Equal(t, []numamem.NodeMemory{{Node: mems[0], HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 4}}}}, res.Assignment.Memory)
	checkMemoryAccount(t, a)
}

// TestPagesTakenOnTheChosenNodeSinceTheLastRead: a host process took the
// pages of the node the CPU rules choose after the allocator last read
// it. The check of that node sees it; every node is then read and the
// container placed where its pages are, never pinned to the node without
// them.
func TestPagesTakenOnTheChosenNodeSinceTheLastRead(t *testing.T) {
	// Where the CPU rules put it with pages everywhere.
	fs := &fakeSysfs{now: snc2Nodes()}
	probe := primed(t, fs)
	r := withMemory("a", 2, 0, numamem.Pages{SizeKB: kb2M, Count: 4})
	r.ReadHugePages = fs.read
	res, err := probe.Allocate(r)
	require.NoError(t, err)
	chosen := res.Assignment.Mems.List()[0]

	fs = &fakeSysfs{now: snc2Nodes()}
	a := primed(t, fs)
	fs.now[chosen] = liveNode{16, 2} // taken after the last read
	r.ReadHugePages = fs.read
	res, err = a.Allocate(r)
	require.NoError(t, err)
	assert.False(t, res.Assignment.Mems.Contains(chosen), "not pinned to node %d, whose pages are gone: %v", chosen, res.Assignment.Mems)
	assert.Equal(t, [][]int{{chosen}, a.mem.MemoryNodes()}, fs.reads, "the chosen node, then every node")
	assert.True(t, numamem.DemandOf(res.Assignment.Memory).Equal(r.Demand))
	for _, nm := range res.Assignment.Memory {
		assert.NotEqual(t, chosen, nm.Node)
	}
	checkMemoryAccount(t, a)
}

// TestAShortNodeByTheLastReadReadsEveryNode: when the counts last read
// leave some node short, the search needs every node's: they are read
// before it, once.
func TestAShortNodeByTheLastReadReadsEveryNode(t *testing.T) {
	fs := &fakeSysfs{now: snc2Nodes()}
	fs.now[1] = liveNode{16, 0}
	a := primed(t, fs)
	fs.now[1] = liveNode{16, 16} // freed since
	r := withMemory("a", 2, 0, numamem.Pages{SizeKB: kb2M, Count: 4})
	r.ReadHugePages = fs.read
	_, err := a.Allocate(r)
	require.NoError(t, err)
	assert.Equal(t, [][]int{a.mem.MemoryNodes()}, fs.reads)
	assert.Equal(t, int64(16), a.mem.PagesOf(1)[0].Free, "node 1's new count is kept")
}

// TestGivenCPUsReadTheirNodesOnly: the kubelet chose the CPUs; their
// nodes are the only ones read, and a shortage there is refused with the
// counts just read.
func TestGivenCPUsReadTheirNodesOnly(t *testing.T) {
	fs := &fakeSysfs{now: snc2Nodes()}
	a := primed(t, fs)
	cpus := cpuset.New(a.x.topo.NUMANodes[2].CPUs.List()[2])
	r := withMemory("a", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 4})
	r.CPUs, r.ReadHugePages = cpus, fs.read
	_, err := a.Allocate(r)
	require.NoError(t, err)
	assert.Equal(t, [][]int{{2}}, fs.reads)

	fs.now[3], fs.reads = liveNode{16, 1}, nil
	r = withMemory("b", 1, 0, numamem.Pages{SizeKB: kb2M, Count: 4})
	r.CPUs, r.ReadHugePages = cpuset.New(a.x.topo.NUMANodes[3].CPUs.List()[2]), fs.read
	_, err = a.Allocate(r)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 4, free node3 1")
	assert.Equal(t, [][]int{{3}}, fs.reads)
}

// TestAFailedLiveReadDecidesOnTheLastRead: a read that fails (the reader
// says why) leaves the counts last read, as before.
func TestAFailedLiveReadDecidesOnTheLastRead(t *testing.T) {
	fs := &fakeSysfs{now: snc2Nodes()}
	a := primed(t, fs)
	fs.fail = true
	r := withMemory("a", 2, 0, numamem.Pages{SizeKB: kb2M, Count: 4})
	r.ReadHugePages = fs.read
	_, err := a.Allocate(r)
	require.NoError(t, err)
	assert.Len(t, fs.reads, 1)

	r = withMemory("b", 2, 0, numamem.Pages{SizeKB: kb2M, Count: 61})
	r.ReadHugePages = fs.read
	_, err = a.Allocate(r)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 61", "the nodes hold 60 by the last read")
}

// TestReadingOnlyTheNodesNeededDecidesAsReadingAll is the property behind
// hugelive.go: over random histories of what the kernel says (pages taken
// and freed behind the allocator's back, pools grown and shrunk), an
// allocator that reads only the nodes its decisions need decides exactly
// as one that reads every node at every decision: the same CPUs, mems and
// holdings, and the same warnings and refusals.
func TestReadingOnlyTheNodesNeededDecidesAsReadingAll(t *testing.T) {
	paths := map[string]int{} // how the decisions of few read, to show each path was taken
	defer func() {
		t.Logf("decisions by their reads: %v", paths)
		for _, path := range []string{"chosen node", "chosen node, then all", "all"} {
			assert.Positive(t, paths[path], "no decision read %s", path)
		}
	}()
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			fs := &fakeSysfs{now: snc2Nodes()}
			few, all := primed(t, fs), primed(t, fs)
			var live []string
			for i := 0; i < 60; i++ {
				if rng.Intn(3) == 0 { // the kernel's counts change
					n := rng.Intn(4)
					total := int64(rng.Intn(24))
					fs.now[n] = liveNode{total, int64(rng.Intn(int(total) + 1))}
				}
				if len(live) > 0 && rng.Intn(3) == 0 {
					j := rng.Intn(len(live))
					few.Release(live[j])
					all.Release(live[j])
					live = slices.Delete(live, j, j+1)
					continue
				}
				id := fmt.Sprintf("c%d", i)
				memory := []int64{0, gib, 40 * gib}[rng.Intn(3)] // none, one that fits, one that may not
				r := withMemory(id, 1+rng.Intn(4), memory, numamem.Pages{SizeKB: kb2M, Count: int64(1 + rng.Intn(8))})
				rf, ra := r, r
				var reads []int
				rf.ReadHugePages = func(nodes []int, sizesKB []int64) map[int][]sysfs.HugePages {
					reads = append(reads, len(nodes))
					return fs.read(nodes, sizesKB)
				}
				ra.HugePagesNow = fs.read(all.mem.MemoryNodes(), []int64{kb2M})
				got, errF := few.Allocate(rf)
				want, errA := all.Allocate(ra)
				paths[map[string]string{"[1]": "chosen node", "[1 4]": "chosen node, then all", "[4]": "all"}[fmt.Sprint(reads)]]++
				require.Equal(t, errA == nil, errF == nil, "step %d: %v / %v", i, errF, errA)
				if errA != nil {
					assert.Equal(t, errA.Error(), errF.Error(), "step %d", i)
					continue
				}
				live = append(live, id)
				require.Equal(t, want.Assignment.CPUs.String(), got.Assignment.CPUs.String(), "step %d: CPUs", i)
				require.Equal(t, want.Assignment.Mems.String(), got.Assignment.Mems.String(), "step %d: mems", i)
				require.Equal(t, want.Assignment.Memory, got.Assignment.Memory, "step %d: holdings", i)
				require.Equal(t, want.Warning, got.Warning, "step %d: warning", i)
			}
			checkMemoryAccount(t, few)
		})
	}
}
