package plugin

import (
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// The watcher runs from Run on, before the runtime's first Synchronize
// (the runtime may be down for minutes). A CPU hot-added then is
// remembered in memory only (no write before the state file is known);
// the first Synchronize must then write it: it compares the node with the
// memory, which already has it, so the file never gets it, and after a
// later hot-remove and restart the CPU has no remembered place.
func TestCPUHotAddedBeforeTheFirstSynchronizeIsWrittenThen(t *testing.T) {
	f := newFakeRuntime(t, true)
	root := f.sysfsRoot("desktop-8c16t")
	full, err := sysfs.Discover(root)
	require.NoError(t, err)
	hotRemoveAt(t, root, 15)
	small, err := sysfs.Discover(root)
	require.NoError(t, err)
	path := sysfs.RememberedPath(statePath(f))
	rec, _ := small.Remember(sysfs.Remembered{})
	require.NoError(t, sysfs.WriteRemembered(path, rec))

	cfg := config.Default()
	cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile = root, f.cgroupRoot, f.procRoot(), statePath(f)
	p, err := New(cfg, small, state.NewFileStore(cfg.StateFile), logrus.New())
	require.NoError(t, err)
	defer p.Close()

	p.rememberCPUs(full) // checkHotplug after CPU 15 is hot-added, before Synchronize
	p.mu.Lock()
	p.rememberSynchronized() // the first Synchronize
	p.synced = true
	p.mu.Unlock()
	p.rememberWG.Wait()

	got, err := sysfs.ReadRemembered(path)
	require.NoError(t, err)
	ids := map[int]bool{}
	for _, c := range got.CPUs {
		ids[c.ID] = true
	}
	assert.True(t, ids[15], "CPU 15, hot-added before the first Synchronize, is not in %s", path)
}
