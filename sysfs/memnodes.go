package sysfs

// Which NUMA node's memory serves a node's CPUs: the one home of that
// mapping, for every cpuset.mems the plugin writes (the containers' through
// the allocator, the pod sandboxes' through the plugin's pinner). A node
// may have CPUs and no memory (a CPU-only node, a sub-NUMA cluster without
// DIMMs: has_memory leaves it out), and the kernel refuses a cpuset.mems
// naming it (EINVAL: not in the root cpuset's mems, N_MEMORY).

import "k8s.io/utils/cpuset"

// NodeDistance is the distance from the node at position i of NUMANodes
// to the one at position j: the SLIT row sysfs gave (Distance), or where
// it gave none, 10 to itself and 20 to another (the kernel's
// LOCAL_DISTANCE and REMOTE_DISTANCE).
func (t *Topology) NodeDistance(i, j int) int {
	if i >= 0 && i < len(t.NUMANodes) && j >= 0 && j < len(t.NUMANodes[i].Distance) {
		return t.NUMANodes[i].Distance[j]
	}
	if i == j {
		return 10
	}
	return 20
}

// MemoryNode is the node whose memory serves the CPUs of the node at
// position i of NUMANodes: itself when it has memory, else the nearest
// node with memory (NodeDistance; of equally near ones, the first in
// NUMANodes). Unknown when no node has memory or there is no such
// position.
func (t *Topology) MemoryNode(i int) int {
	if i < 0 || i >= len(t.NUMANodes) {
		return Unknown
	}
	if t.NUMANodes[i].HasMemory {
		return t.NUMANodes[i].ID
	}
	best, bestDist := Unknown, 0
	for j, other := range t.NUMANodes {
		if d := t.NodeDistance(i, j); other.HasMemory && (best == Unknown || d < bestDist) {
			best, bestDist = other.ID, d
		}
	}
	return best
}

// MemoryNodesOf is the memory nodes serving the given CPUs (MemoryNode of
// each of their nodes, NUMANodesOf): what a cpuset.mems for those CPUs
// names. CPUs of no known node, and nodes served by none, add nothing.
func (t *Topology) MemoryNodesOf(cpus cpuset.CPUSet) cpuset.CPUSet {
	nodes := t.NUMANodesOf(cpus)
	var mems []int
	for i, n := range t.NUMANodes {
		if !nodes.Contains(n.ID) {
			continue
		}
		if m := t.MemoryNode(i); m != Unknown {
			mems = append(mems, m)
		}
	}
	return cpuset.New(mems...)
}
