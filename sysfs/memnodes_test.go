package sysfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/cpuset"
)

// TestMemoryNodes: a node with memory serves its own CPUs; a memory-less
// one is served by the nearest node with memory by the SLIT row (the first
// of equally near ones), and by 20 to every other node where sysfs gave no
// row; with no node of memory at all, none is named (an empty cpuset.mems
// is the caller's to avoid, never a node the kernel refuses).
func TestMemoryNodes(t *testing.T) {
	topo := &Topology{
		CPUs: []CPU{{ID: 0, NUMA: 0}, {ID: 1, NUMA: 1}, {ID: 2, NUMA: 2}, {ID: 3, NUMA: 3}, {ID: 4, NUMA: Unknown}},
		NUMANodes: []NUMANode{
			{ID: 0, CPUs: cpuset.New(0), Distance: []int{10, 21, 12, 21}, HasMemory: true},
			{ID: 1, CPUs: cpuset.New(1), Distance: []int{21, 10, 21, 12}},
			{ID: 2, CPUs: cpuset.New(2), Distance: []int{12, 21, 10, 21}},
			{ID: 3, CPUs: cpuset.New(3), HasMemory: true},
		},
	}
	assert.Equal(t, 0, topo.MemoryNode(0), "its own memory")
	assert.Equal(t, 3, topo.MemoryNode(1), "12 to node 3, 21 to node 0")
	assert.Equal(t, 0, topo.MemoryNode(2), "12 to node 0")
	assert.Equal(t, Unknown, topo.MemoryNode(4), "no such node")
	assert.Equal(t, 20, topo.NodeDistance(3, 0), "no SLIT row: remote")
	assert.Equal(t, 10, topo.NodeDistance(3, 3), "no SLIT row: local")
	assert.Equal(t, "0,3", topo.MemoryNodesOf(cpuset.New(0, 1, 2)).String())
	assert.Equal(t, "", topo.MemoryNodesOf(cpuset.New(4, 9)).String(), "CPUs of no known node")

	tie := &Topology{NUMANodes: []NUMANode{{ID: 0, HasMemory: true}, {ID: 1}, {ID: 2, HasMemory: true}}}
	assert.Equal(t, 0, tie.MemoryNode(1), "equally near (20): the first")

	none := &Topology{CPUs: []CPU{{ID: 0, NUMA: 0}}, NUMANodes: []NUMANode{{ID: 0, CPUs: cpuset.New(0)}}}
	assert.Equal(t, Unknown, none.MemoryNode(0))
	assert.True(t, none.MemoryNodesOf(cpuset.New(0)).IsEmpty())
}
