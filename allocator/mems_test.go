package allocator

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestMemsOfMemorylessNode: a container on a NUMA node without memory (a
// CPU-only SNC or CXL-style node) gets the nearest node with memory as its
// cpuset.mems, and one on a node with memory gets that node.
func TestMemsOfMemorylessNode(t *testing.T) {
	root := fixture.Root(t, "xeon-2s-snc2") // distances from node 1: 12 to node 0, 21 to nodes 2 and 3
	require.NoError(t, os.WriteFile(filepath.Join(root, "sys/devices/system/node/has_memory"), []byte("0,2-3\n"), 0o644))
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	require.False(t, topo.NUMANodes[1].HasMemory)
	cfg := parseConfig(t, `isolatedCPUs: "1-39,41-79"
pinMemory: true`)
	layout, problems := BuildLayout(topo, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	a := New(topo, layout, cfg.PinMemory)

	for node, want := range map[int]string{0: "0", 1: "0", 2: "2", 3: "3"} {
		r := exclusive(fmt.Sprintf("on-%d", node), 2)
		r.NUMANodes = cpuset.New(node)
		res, err := a.Allocate(r)
		require.NoError(t, err)
		require.Equal(t, cpuset.New(node), topo.NUMANodesOf(res.Assignment.CPUs), "placed on the node asked for")
		assert.Equal(t, want, res.Assignment.Mems.String(), "mems of a container on node %d", node)
	}
	assert.Equal(t, "0", a.x.memsFor(set(t, "0,20")).String(), "nodes 0 and 1: node 0's memory, once")
	assert.Equal(t, "0,2", a.x.memsFor(set(t, "20,1")).String(), "nodes 1 and 2")
	assert.Equal(t, "", a.x.memsFor(set(t, "500")).String(), "a CPU the topology does not list")
}
