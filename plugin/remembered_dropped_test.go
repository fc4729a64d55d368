package plugin

import (
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// A record entry that cannot be put back (here a hot-removed CPU listed
// twice, the record hand-edited) is said once at start, naming the file
// and the CPU, and the CPU is put back once.
func TestRememberedEntryNotPutBackIsSaidOnceAtStart(t *testing.T) {
	f := newFakeRuntime(t, true)
	root := f.sysfsRoot("desktop-8c16t")
	full, err := sysfs.Discover(root)
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})
	for _, c := range rec.CPUs {
		if c.ID == 15 {
			rec.CPUs = append(rec.CPUs, c)
		}
	}
	path := sysfs.RememberedPath(statePath(f))
	require.NoError(t, sysfs.WriteRemembered(path, rec))
	hotRemoveAt(t, root, 15)
	small, err := sysfs.Discover(root)
	require.NoError(t, err)

	cfg := config.Default()
	cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile = root, f.cgroupRoot, f.procRoot(), statePath(f)
	log := logrus.New()
	var out strings.Builder
	log.SetOutput(&out)
	p, err := New(cfg, small, state.NewFileStore(cfg.StateFile), log)
	require.NoError(t, err)
	defer p.Close()
	assert.Equal(t, 1, strings.Count(out.String(), "CPU 15: listed again"), "%s", out.String())
	assert.Contains(t, out.String(), path)
	assert.True(t, p.topo.Absent.Contains(15))
	assert.Len(t, p.topo.CPUs, len(full.CPUs))
}
