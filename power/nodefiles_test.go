package power

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDriverFilesKeptUntilRescan: what describes the node's drivers (the
// governors on offer) is read once and kept by the passes a change kicks,
// and read anew by the rescan, which then finds a governor loaded since;
// the governor a preference depends on, which the plugin and others
// write, is read at every pass.
func TestDriverFilesKeptUntilRescan(t *testing.T) {
	n := newNode(t, "epyc-1s-nps4")
	cfg := loadClasses(t, `
    odd: {governor: schedutil, energyPerformancePreference: balance_power}
`)
	require.NoError(t, os.WriteFile(n.cpu(1, "cpufreq/scaling_governor"), []byte("performance\n"), 0o644))
	p := n.start(t, cfg, n.kernel)
	p.want.set(map[int]string{0: "odd", 1: "odd"})
	require.NoError(t, p.rec.Flush())
	assert.Equal(t, "powersave", n.read(t, n.cpu(0, "cpufreq/scaling_governor")), "schedutil is not offered")
	assert.Equal(t, "balance_performance", n.read(t, n.cpu(1, "cpufreq/energy_performance_preference")), "CPU 1's governor is performance: its preference is left alone")

	// schedutil's module is loaded; CPU 1's governor is set to powersave.
	for _, cpu := range []int{0, 1} {
		require.NoError(t, os.WriteFile(n.cpu(cpu, "cpufreq/scaling_available_governors"), []byte("performance powersave schedutil\n"), 0o644))
	}
	require.NoError(t, os.WriteFile(n.cpu(1, "cpufreq/scaling_governor"), []byte("powersave\n"), 0o644))
	require.NoError(t, os.WriteFile(n.cpu(1, "cpufreq/energy_performance_preference"), []byte("balance_performance\n"), 0o644))
	require.NoError(t, p.rec.FlushKicked())
	assert.Equal(t, "powersave", n.read(t, n.cpu(0, "cpufreq/scaling_governor")), "a kicked pass keeps what it read of the governors on offer")
	assert.Equal(t, "balance_power", n.read(t, n.cpu(1, "cpufreq/energy_performance_preference")), "and reads the governor anew")

	require.NoError(t, p.rec.Flush())
	assert.Equal(t, "schedutil", n.read(t, n.cpu(0, "cpufreq/scaling_governor")), "the rescan found schedutil offered")
}

// TestDriverFileReadFailureNotKept: a driver file that exists but could
// not be read (EBUSY from a driver in the middle of a change; here a
// directory where the file belongs) is not kept as unreadable until the
// rescan: the next read tries again, as every pass did before the files
// were kept. A file that does not exist is kept as absent.
func TestDriverFileReadFailureNotKept(t *testing.T) {
	dir := t.TempDir()
	busy, absent := dir+"/scaling_available_governors", dir+"/energy_performance_available_preferences"
	require.NoError(t, os.Mkdir(busy, 0o755))
	f := newNodeFiles()
	_, ok := f.readText(busy)
	require.False(t, ok, "a directory cannot be read as the file")
	_, ok = f.readText(absent)
	require.False(t, ok)

	require.NoError(t, os.Remove(busy))
	require.NoError(t, os.WriteFile(busy, []byte("performance powersave\n"), 0o644))
	require.NoError(t, os.WriteFile(absent, []byte("default performance\n"), 0o644))
	text, ok := f.readText(busy)
	assert.True(t, ok, "a failed read of an existing file is tried again")
	assert.Equal(t, "performance powersave", text)
	_, ok = f.readText(absent)
	assert.False(t, ok, "an absent file is kept as absent until the rescan")
}
