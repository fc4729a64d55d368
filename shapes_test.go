package nricpupool

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestShippedTopologiesAreTheSourceTrees: the binary carries every shape
// of testdata/topologies, each one a spec sysfs/fixture reads, and finds
// no name that is not one (a path, a parent, a shape with its suffix).
func TestShippedTopologiesAreTheSourceTrees(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(topologiesDir, "*.yaml"))
	require.NoError(t, err)
	var want []string
	for _, f := range files {
		want = append(want, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	require.NotEmpty(t, want)
	slices.Sort(want)
	assert.Equal(t, want, TopologyNames())
	for _, name := range TopologyNames() {
		b, ok := Topology(name)
		require.True(t, ok, name)
		disk, err := os.ReadFile(filepath.Join(topologiesDir, name+".yaml"))
		require.NoError(t, err)
		assert.Equal(t, string(disk), string(b), name)
		_, err = fixture.ParseSpec(name, b)
		assert.NoError(t, err, name)
	}
	for _, bad := range []string{"", "../go", "testdata/topologies/vm-2cpu", "vm-2cpu.yaml", "/vm-2cpu", "nosuch"} {
		_, ok := Topology(bad)
		assert.False(t, ok, "%q", bad)
	}
}
