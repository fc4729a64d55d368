package allocator

import (
	"maps"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// index is a precomputed, read-only view of the topology that placement
// walks on every decision: cores, L3 groups and NUMA nodes as plain slices
// of CPU ids so that no decision needs maps or set arithmetic.
type index struct {
	topo  *sysfs.Topology
	cpus  []cpuInfo // indexed by CPU id
	cores [][]int   // indexed by core index: the core's online threads, ascending
	// threadsPerCore is the largest number of online threads of any core.
	threadsPerCore int
	nodes          []int // NUMA node ids, ascending
	nodePos        map[int]int
	distance       [][]int // by node position
}

type cpuInfo struct {
	online                 bool
	core, l3, numa, socket int
	baseFreqKHz            int64
}

func newIndex(topo *sysfs.Topology) *index {
	maxID := 0
	for _, c := range topo.CPUs {
		maxID = max(maxID, c.ID)
	}
	x := &index{topo: topo, cpus: make([]cpuInfo, maxID+1), nodePos: map[int]int{}}
	maxCore := -1
	for _, c := range topo.CPUs {
		x.cpus[c.ID] = cpuInfo{online: c.Online, core: c.Core, l3: c.L3, numa: c.NUMA, socket: c.Socket, baseFreqKHz: c.BaseFreqKHz}
		maxCore = max(maxCore, c.Core)
	}
	x.cores = make([][]int, maxCore+1)
	for _, c := range topo.CPUs {
		if c.Online && c.Core >= 0 {
			x.cores[c.Core] = append(x.cores[c.Core], c.ID)
		}
	}
	for _, threads := range x.cores {
		x.threadsPerCore = max(x.threadsPerCore, len(threads))
	}
	for i, n := range topo.NUMANodes {
		x.nodes = append(x.nodes, n.ID)
		x.nodePos[n.ID] = i
	}
	x.distance = make([][]int, len(x.nodes))
	for i, n := range topo.NUMANodes {
		x.distance[i] = make([]int, len(x.nodes))
		for j := range x.nodes {
			switch {
			case j < len(n.Distance):
				x.distance[i][j] = n.Distance[j]
			case i == j:
				x.distance[i][j] = 10
			default:
				x.distance[i][j] = 20
			}
		}
	}
	return x
}

func (x *index) online(id int) bool { return id >= 0 && id < len(x.cpus) && x.cpus[id].online }

// memsFor returns the NUMA nodes holding memory closest to the CPUs: their
// own nodes, or for memory-less nodes the nearest node with memory.
func (x *index) memsFor(cpus cpuset.CPUSet) cpuset.CPUSet {
	var mems []int
	for _, node := range x.topo.NUMANodesOf(cpus).List() {
		n, _ := x.topo.NUMANode(node)
		if n.HasMemory {
			mems = append(mems, node)
			continue
		}
		best, bestDist := -1, 0
		for j, other := range x.topo.NUMANodes {
			d := x.distance[x.nodePos[node]][j]
			if other.HasMemory && (best < 0 || d < bestDist) {
				best, bestDist = other.ID, d
			}
		}
		if best >= 0 {
			mems = append(mems, best)
		}
	}
	return cpuset.New(mems...)
}

// poolView groups a fixed set of CPUs by NUMA node, L3 group and core, in
// the order placement prefers to walk them.
type poolView struct {
	cpus  cpuset.CPUSet
	nodes []nodeView
}

type nodeView struct {
	id     int
	socket int
	l3s    []l3View
}

type l3View struct {
	id    int
	cores []coreView
}

// coreView holds the threads of one core that belong to the pool.
type coreView struct {
	index   int
	threads []int
	// complete is true when every online thread of the core is in the pool.
	complete bool
}

func (x *index) view(cpus cpuset.CPUSet) *poolView {
	v := &poolView{cpus: cpus}
	type key struct{ node, l3, core int }
	byNode := map[int]map[int]map[int][]int{}
	for _, id := range cpus.List() {
		c := x.cpus[id]
		if byNode[c.numa] == nil {
			byNode[c.numa] = map[int]map[int][]int{}
		}
		if byNode[c.numa][c.l3] == nil {
			byNode[c.numa][c.l3] = map[int][]int{}
		}
		byNode[c.numa][c.l3][c.core] = append(byNode[c.numa][c.l3][c.core], id)
	}
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		nv := nodeView{id: node, socket: -1}
		for _, l3 := range slices.Sorted(maps.Keys(byNode[node])) {
			lv := l3View{id: l3}
			for _, core := range slices.Sorted(maps.Keys(byNode[node][l3])) {
				threads := byNode[node][l3][core]
				nv.socket = x.cpus[threads[0]].socket
				lv.cores = append(lv.cores, coreView{index: core, threads: threads, complete: len(threads) == len(x.cores[core])})
			}
			nv.l3s = append(nv.l3s, lv)
		}
		v.nodes = append(v.nodes, nv)
	}
	return v
}
