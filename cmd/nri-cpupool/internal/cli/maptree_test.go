package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// treeShape writes the boxes as "title{child, child}".
func treeShape(g *mapGroup) string {
	var parts []string
	for _, c := range g.children {
		s := c.title
		if !c.leaf() {
			s += "{" + treeShape(c) + "}"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestMapTreeNestsLevelsAsTheyContainEachOther(t *testing.T) {
	for _, tc := range []struct{ fixture, shape string }{
		{"desktop-8c16t", "socket 0, NUMA 0, L3 0"},
		{"xeon-2s-interleaved", "socket 0, NUMA 0, L3 0 socket 1, NUMA 1, L3 1"},
		// SNC: the L3 spans the socket's two NUMA nodes.
		{"xeon-2s-snc2", "socket 0, L3 0{NUMA 0 NUMA 1} socket 1, L3 1{NUMA 2 NUMA 3}"},
		// NPS4: NUMA nodes in the socket, two CCX each.
		{"epyc-1s-nps4", "socket 0{NUMA 0{L3 0 L3 1} NUMA 1{L3 2 L3 3} NUMA 2{L3 4 L3 5} NUMA 3{L3 6 L3 7}}"},
		// NPS0: one NUMA node for both sockets.
		{"epyc-2s-nps0", "NUMA 0{socket 0{L3 0 L3 1 L3 2 L3 3} socket 1{L3 4 L3 5 L3 6 L3 7}}"},
		{"kubelet-multi-socket-dual-socket-per-numa-ht", "NUMA 0{socket 0, L3 0 socket 1, L3 1} NUMA 1{socket 2, L3 2 socket 3, L3 3}"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			assert.Equal(t, tc.shape, treeShape(groupNode(discover(t, tc.fixture))))
		})
	}
}

// A group that no nesting keeps in one box says it is a part: here an L3
// group spanning two NUMA nodes while a NUMA node spans two L3 groups.
func TestMapTreeTitlesASplitGroup(t *testing.T) {
	cpu := func(id, numa, l3 int) sysfs.CPU {
		return sysfs.CPU{ID: id, Online: true, Core: id, NUMA: numa, L3: l3, Siblings: cpuset.New(id)}
	}
	topo := &sysfs.Topology{Online: cpuset.New(0, 1, 2, 3, 4, 5), CPUs: []sysfs.CPU{
		cpu(0, 0, 0), cpu(1, 0, 1), cpu(2, 1, 1), cpu(3, 1, 2), cpu(4, 2, 2), cpu(5, 2, 0),
	}}
	assert.Equal(t, "socket 0{NUMA 0{L3 0 (part) L3 1 (part)} NUMA 1{L3 1 (part) L3 2 (part)} NUMA 2{L3 0 (part) L3 2 (part)}}",
		treeShape(groupNode(topo)))
}

func TestMapTreeRowsAreBalanced(t *testing.T) {
	leaf := &mapGroup{cores: make([][]int, 20)}
	assert.Equal(t, 7*5+6*1, fitRows(leaf, 8*5+7, 5, 1), "room for 8: 3 rows of 7, 7 and 6")
	assert.Equal(t, 7, leaf.perRow)
	assert.Equal(t, 5, fitRows(leaf, 3, 5, 1), "no room: one core a row all the same")
	assert.Equal(t, 1, leaf.perRow)
}
