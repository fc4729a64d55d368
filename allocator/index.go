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
	// memNode is, by node position, the node whose memory serves the
	// node's CPUs: itself, or for a memory-less node the nearest node with
	// memory; sysfs.Unknown when no node has memory.
	memNode []int
}

type cpuInfo struct {
	// present: the topology lists it (online or offline); ids it does not
	// list are holes of the index.
	present, online        bool
	core, l3, numa, socket int
	baseFreqKHz            int64
}

func newIndex(topo *sysfs.Topology) *index {
	maxID := 0
	for _, c := range topo.CPUs {
		maxID = max(maxID, c.ID)
	}
	x := &index{topo: topo, cpus: make([]cpuInfo, maxID+1), nodePos: map[int]int{}}
	for id := range x.cpus { // ids the topology does not list
		x.cpus[id] = cpuInfo{core: sysfs.Unknown, l3: sysfs.Unknown, numa: sysfs.Unknown, socket: sysfs.Unknown}
	}
	maxCore := -1
	for _, c := range topo.CPUs {
		x.cpus[c.ID] = cpuInfo{present: true, online: c.Online, core: c.Core, l3: c.L3, numa: c.NUMA, socket: c.Socket, baseFreqKHz: c.BaseFreqKHz}
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
	// Precomputed from the topology's own rules (sysfs/memnodes.go), the
	// one home of the memory-less node mapping that the sandboxes' mems
	// use too.
	x.distance = make([][]int, len(x.nodes))
	for i := range x.nodes {
		x.distance[i] = make([]int, len(x.nodes))
		for j := range x.nodes {
			x.distance[i][j] = topo.NodeDistance(i, j)
		}
	}
	x.memNode = make([]int, len(x.nodes))
	for i := range x.nodes {
		x.memNode[i] = topo.MemoryNode(i)
	}
	return x
}

func (x *index) online(id int) bool { return id >= 0 && id < len(x.cpus) && x.cpus[id].online }

// present tells whether the node has the CPU, online or offline: an
// offline one still has its place in the index, and may have an owner.
func (x *index) present(id int) bool { return id >= 0 && id < len(x.cpus) && x.cpus[id].present }

// memsFor returns the NUMA nodes holding memory closest to the CPUs: their
// own nodes, or for memory-less nodes the nearest node with memory.
func (x *index) memsFor(cpus cpuset.CPUSet) cpuset.CPUSet {
	var mems []int
	for _, node := range x.numaNodes(cpus) {
		pos, ok := x.nodePos[node]
		if !ok {
			continue // a node sysfs did not list: no memory known there
		}
		if m := x.memNode[pos]; m != sysfs.Unknown && !slices.Contains(mems, m) {
			mems = append(mems, m)
		}
	}
	return cpuset.New(mems...)
}

// numaNodes returns the distinct NUMA nodes of the CPUs, in no order: a
// walk over the CPUs given, not over the whole topology, since decisions
// ask it of a few CPUs on nodes with hundreds.
func (x *index) numaNodes(cpus cpuset.CPUSet) []int {
	var nodes []int
	for _, id := range cpus.UnsortedList() {
		if id < 0 || id >= len(x.cpus) {
			continue
		}
		if n := x.cpus[id].numa; n != sysfs.Unknown && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// numaNodesOf is numaNodes as a set.
func (x *index) numaNodesOf(cpus cpuset.CPUSet) cpuset.CPUSet {
	return cpuset.New(x.numaNodes(cpus)...)
}

// poolView groups a fixed set of CPUs by NUMA node, L3 group and core, in
// the order placement prefers to walk them.
type poolView struct {
	cpus  cpuset.CPUSet
	nodes []nodeView
}

type nodeView struct {
	id int
	// socket is the node's socket, or -1 when the node spans several (a
	// BIOS that interleaves memory across sockets shows one node for two).
	socket int
	l3s    []l3View
}

type l3View struct {
	id     int
	socket int // an L3 cache never spans sockets
	cores  []coreView
}

// coreView holds the threads of one core that belong to the pool.
type coreView struct {
	index   int
	threads []int
	// complete is true when every online thread of the core is in the pool.
	complete bool
	// offline are the core's offline threads, which a hide-hyperthreads
	// container placed on it holds idle once they come online;
	// offlineAway tells that one of them joins another pool then, so
	// that such a container must not take the core (hideable).
	offline     []int
	offlineAway bool
}

func (x *index) view(cpus cpuset.CPUSet) *poolView {
	v := &poolView{cpus: cpus}
	byNode := map[int]map[int]map[int][]int{}
	for _, id := range cpus.List() {
		c := x.cpus[id]
		if byNode[c.numa] == nil {
			byNode[c.numa] = map[int]map[int][]int{}
		}
		// A CPU without L3 information is grouped with its socket's, never
		// with another socket's: no L3 group spans sockets.
		l3 := c.l3
		if l3 == sysfs.Unknown {
			l3 = -2 - c.socket
		}
		if byNode[c.numa][l3] == nil {
			byNode[c.numa][l3] = map[int][]int{}
		}
		byNode[c.numa][l3][c.core] = append(byNode[c.numa][l3][c.core], id)
	}
	// Every core's threads in one array, in walk order: a decision reads
	// them all, and cold memory costs it more than the walk itself.
	flat := make([]int, 0, cpus.Size())
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		nv := nodeView{id: node, socket: -2}
		for _, l3 := range slices.Sorted(maps.Keys(byNode[node])) {
			lv := l3View{id: l3}
			for _, core := range slices.Sorted(maps.Keys(byNode[node][l3])) {
				start := len(flat)
				flat = append(flat, byNode[node][l3][core]...)
				threads := flat[start:len(flat):len(flat)]
				lv.socket = x.cpus[threads[0]].socket
				lv.cores = append(lv.cores, coreView{index: core, threads: threads, complete: len(threads) == len(x.cores[core])})
			}
			switch nv.socket {
			case -2:
				nv.socket = lv.socket
			case lv.socket:
			default:
				nv.socket = -1
			}
			nv.l3s = append(nv.l3s, lv)
		}
		v.nodes = append(v.nodes, nv)
	}
	return v
}
