package drarun

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestUnreadableClaimsFileStartsTheDriverAndIsCounted: a DRA claims file
// that cannot be read made New fail, and run exit; now the
// driver starts and the file is counted in
// cpupool_files_discarded_total{file="dra-claims"}.
func TestUnreadableClaimsFileStartsTheDriverAndIsCounted(t *testing.T) {
	cfg := config.Default()
	dir := t.TempDir()
	cfg.SysfsRoot = fixture.Root(t, "desktop-8c16t")
	cfg.StateFile, cfg.CgroupRoot, cfg.ProcRoot = filepath.Join(dir, "state.json"), dir, filepath.Join(dir, "proc")
	cfg.DRA.Enabled, cfg.DRA.NodeName, cfg.DRA.CDIDir = true, "node-a", filepath.Join(dir, "cdi")
	cfg.DRA.PluginDir, cfg.DRA.RegistryDir = filepath.Join(dir, "plugins"), filepath.Join(dir, "registry")
	require.NoError(t, os.MkdirAll(dra.ClaimsFile(cfg.StateFile), 0o700))
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	p, err := plugin.New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	require.NoError(t, err)
	t.Cleanup(p.Close)

	d, err := New(cfg, p, log)
	require.NoError(t, err, "an unreadable claims file must not stop the daemon")
	require.NotNil(t, d)
	families, err := p.Registry().Gather()
	require.NoError(t, err)
	counted := -1.0
	for _, f := range families {
		if f.GetName() != "cpupool_files_discarded_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "file" && l.GetValue() == "dra-claims" {
					counted = m.GetCounter().GetValue()
				}
			}
		}
	}
	assert.Equal(t, 1.0, counted)
}
