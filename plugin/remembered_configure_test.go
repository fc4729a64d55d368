package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/config/nodecheck"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// A plugin the runtime launches starts on the default state directory and
// learns its state file from Configure. The remembered CPUs are those
// beside the configured state file (validate reads them there), not those
// of the directory it started on: after vCPU 15 is hot-removed, the
// runtime-launched restart must lay out the pools validate lays out.
func TestRuntimeLaunchedPluginReadsTheRememberedCPUsOfItsConfiguredStateFile(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopExclusive12, statePath(f), fastHotplug)
	root := f.sysfsRoot(desktopExclusive12.fixture)
	hotRemoveAt(t, root, 15)
	waitLayout(t, rp, "2-7,10-14")
	time.Sleep(50 * time.Millisecond)
	running, _ := layoutNow(rp)
	cfg := reloadConfig(t, rp, desktopExclusive12.config)
	rp.stop()

	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	node, _, nerr := nodecheck.Node(topo, cfg)
	require.NoError(t, nerr)
	vl, vp := nodecheck.Check(node, cfg)
	require.False(t, vp.HasErrors(), "validate: %v", vp.Errors())
	require.Equal(t, running, vl.Exclusive.String())

	// Launched: the binary's own config (no arguments), another state dir.
	launched := config.Default()
	launched.SysfsRoot, launched.CgroupRoot, launched.ProcRoot = cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot
	launched.StateFile = filepath.Join(t.TempDir(), "state.json")
	log := logrus.New()
	var out strings.Builder
	log.SetOutput(&out)
	p, err := New(launched, topo, state.NewFileStore(launched.StateFile), log)
	require.NoError(t, err)
	defer p.Close()
	dropIn := desktopExclusive12.config + fmt.Sprintf("cgroupRoot: %s\nprocRoot: %s\nstateFile: %s\n", cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile)
	_, err = p.Configure(context.Background(), dropIn, "fake-runtime", "v0")
	require.NoError(t, err, "the drop-in validate accepts is refused by the runtime-launched plugin:\n%s", out.String())
	_, l := p.Layout()
	assert.Equal(t, running, l.Exclusive.String())
}
