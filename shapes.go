// Package nricpupool holds what the binaries carry of the repository
// beside its code: the machine shapes of testdata/topologies, which
// `nri-cpupool simulate --topology NAME` renders from any directory, not
// only a source tree. They are the compact YAML descriptions (18 KB
// together) that sysfs/fixture renders, never the sysfs trees of
// `make fixtures`. The package sits at the module's root because embed
// reaches no file above a package's directory.
package nricpupool

import (
	"embed"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// topologiesDir is where the shapes are, in the source tree and in the
// embedded files alike.
const topologiesDir = "testdata/topologies"

//go:embed testdata/topologies/*.yaml
var topologies embed.FS

// Topology returns the YAML of the shipped shape NAME (the file
// testdata/topologies/NAME.yaml), and whether there is one.
func Topology(name string) ([]byte, bool) {
	if !fs.ValidPath(name) || strings.Contains(name, "/") {
		return nil, false
	}
	b, err := topologies.ReadFile(path.Join(topologiesDir, name+".yaml"))
	return b, err == nil
}

// TopologyNames lists the shipped shapes, sorted.
func TopologyNames() []string {
	entries, _ := topologies.ReadDir(topologiesDir) // embedded: cannot fail
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(names)
	return names
}
