package power

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestPassiveModePreferenceRestoredUnderPerformance: intel_pstate in its
// passive mode (scaling_driver intel_cpufreq, HWP on) keeps the
// preference files, but its performance governor is cpufreq's generic
// one: the preference neither reads performance nor refuses a write
// under it. CPU 4 had the saver class (preference power); an admin sets
// the governor to performance and the class ends. The preference is
// restored at once, not held as if the driver refused it (nor said to be
// refused, EBUSY, in a warning).
func TestPassiveModePreferenceRestoredUnderPerformance(t *testing.T) {
	dir, err := fixture.SpecDir()
	require.NoError(t, err)
	spec, err := fixture.LoadSpec(filepath.Join(dir, "xeon-2s-interleaved.yaml"))
	require.NoError(t, err)
	spec.CoresPerSocket, spec.CoreIDs, spec.IsolatedFile, spec.Cmdline, spec.Devices = 2, "", "", "", nil
	spec.Power.CPUFreqDriver = "intel_cpufreq"
	root := shmDir(t)
	require.NoError(t, spec.Write(root))
	n := nodeAt(t, root)
	require.NotEmpty(t, spec.Power.EPP, "the fixture has HWP's preference files")

	p := n.start(t, loadClasses(t, ""), hostfiles.OS{}) // no pinning: the passive mode
	p.pass(t, map[int]string{4: "saver"})
	epp := n.cpu(4, "cpufreq/energy_performance_preference")
	require.Equal(t, "power", n.read(t, epp))
	require.NoError(t, hostfiles.OS{}.WriteFile(n.cpu(4, "cpufreq/scaling_governor"), []byte("performance")), "the admin")
	p.want.set(nil)
	require.NoError(t, p.rec.Flush())
	assert.Equal(t, "balance_performance", n.read(t, epp))
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Empty(t, records)
	assert.Empty(t, p.src.Report().Held)
}
