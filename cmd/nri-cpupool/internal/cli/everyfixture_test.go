package cli

import (
	"testing"

	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestCommandsOnEveryFixture runs what must work on every machine shape in
// testdata/topologies: topology (text and JSON), validate, and the node map
// within 80 columns. Each shape is rendered once for the three: the large
// ones are over 12,000 files, and rendering each three times was most of
// these checks' time. The shapes run in parallel: they only read their own
// rendered tree.
func TestCommandsOnEveryFixture(t *testing.T) {
	for _, name := range fixture.Names(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := fixture.Root(t, name)
			t.Run("topology", func(t *testing.T) { checkTopologyOnFixture(t, root) })
			t.Run("validate", func(t *testing.T) { checkValidateOnFixture(t, root) })
			t.Run("nodemap-80-columns", func(t *testing.T) { checkNodeMapFitsEightyColumns(t, root) })
		})
	}
}
