package power

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// TestRestartRestoresPerformanceGovernorAndPreference:
// the restart half of TestPerformanceGovernorAndPreferenceRestored
// started after the first process had restored everything (its journal
// empty), so it could not fail. Here the first process dies with the class applied, and a
// new one that wants nothing (a restart with power off, restore-host)
// must restore the governor and the preference from the journal alone.
func TestRestartRestoresPerformanceGovernorAndPreference(t *testing.T) {
	n, orig, p := turboOnCPU2(t)
	p.rec.Close() // kill -9: nothing restored
	q := n.start(t, loadClasses(t, ""), n.kernel)
	for range 4 {
		_ = q.rec.Flush()
	}
	assert.Empty(t, changed(orig, n.snapshot(t)), "a new process wanting nothing puts every file back")
	assert.Empty(t, q.rec.Status().Failures)
}

// TestKilledBetweenGovernorAndPreferenceRestores: killed after the pass that restored
// the governor and held the preference, the next process (wanting
// nothing) restores the preference from the journal.
func TestKilledBetweenGovernorAndPreferenceRestores(t *testing.T) {
	n, orig, p := turboOnCPU2(t)
	p.want.set(nil)
	require.NoError(t, p.rec.Flush())
	require.Equal(t, "powersave", n.read(t, n.cpu(2, "cpufreq/scaling_governor")), "the governor first")
	p.rec.Close()
	q := n.start(t, loadClasses(t, ""), n.kernel)
	require.NoError(t, q.rec.Flush())
	assert.Empty(t, changed(orig, n.snapshot(t)))
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestKilledBetweenPerformanceBootedPasses: a performance-booted node, the class eco
// given; killed after the pass that wrote the governor (the preference
// left for later), the next process with the same class records the
// node's own preference, and restores everything on release.
func TestKilledBetweenPerformanceBootedPasses(t *testing.T) {
	n, policy := performanceBootedNode(t)
	orig := n.snapshot(t)
	eco := "\n    eco: {governor: powersave, energyPerformancePreference: power}\n"
	p := n.start(t, loadClasses(t, eco), n.kernel)
	p.want.set(map[int]string{2: "eco"})
	require.NoError(t, p.rec.Flush())
	require.Equal(t, "powersave", n.read(t, filepath.Join(policy, "scaling_governor")))
	p.rec.Close()
	q := n.start(t, loadClasses(t, eco), n.kernel)
	q.pass(t, map[int]string{2: "eco"})
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Equal(t, "balance_performance", records[filepath.Join(policy, "energy_performance_preference")].Original)
	q.pass(t, nil)
	assert.Empty(t, changed(orig, n.snapshot(t)))
	assert.Equal(t, "balance_performance", n.kernel.saved[policy])
}

// TestPerformanceBootedNodeEcoThenTurboReleased: a node
// booted with the performance governor (tuned latency-performance; the
// driver remembers balance_performance). CPU 2 idles in eco (governor
// powersave, preference power: the M3 path records the node's
// balance_performance and performance as the governor's original), then
// a container gets turbo (governor performance, preference performance,
// H2's class). The switch to performance makes the driver remember the
// class's power. Then the class is released (or the daemon stops for
// good, restore-host): the governor's restore writes performance (its
// original, already there) and drops its record; the preference is held
// by restoredPreference "as it reads" under the performance governor,
// with no governor record left to make the pass Pending, for good. The
// journal keeps the record forever (restore-host lists it LEFT), and the
// driver keeps the class's power as the policy's preference: the node is
// left changed.
func TestPerformanceBootedNodeEcoThenTurboReleased(t *testing.T) {
	n, policy := performanceBootedNode(t)
	orig := n.snapshot(t)
	cfg := loadClasses(t, turboClass+"    eco: {governor: powersave, energyPerformancePreference: power}\n")
	p := n.start(t, cfg, n.kernel)
	p.pass(t, map[int]string{2: "eco"})
	require.Equal(t, "power", n.read(t, filepath.Join(policy, "energy_performance_preference")))
	p.pass(t, map[int]string{2: "turbo"})
	require.Equal(t, "performance", n.read(t, filepath.Join(policy, "scaling_governor")))

	p.want.set(nil)
	for range 6 {
		_ = p.rec.Flush()
	}
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	t.Logf("journal left: %v; driver remembers %q; status %+v", records, n.kernel.saved[policy], p.rec.Status().Failures)
	assert.Empty(t, changed(orig, n.snapshot(t)), "the files read as booted")
	assert.Empty(t, records, "every record restored")
	assert.Equal(t, "balance_performance", n.kernel.saved[policy], "the driver's memory of the preference is the node's again")
}

// TestPerformanceBootedNodeEcoThenGovernorOnlyPerformanceReleased: the contrast to
// TestPerformanceBootedNodeEcoThenTurboReleased. A class that sets the
// performance governor WITHOUT claiming the preference lets the eco
// preference be restored in the restore step, under eco's powersave,
// before the governor switch: the driver remembers the node's own, and
// the release leaves nothing. (Passes: the defect is turbo's claim.)
func TestPerformanceBootedNodeEcoThenGovernorOnlyPerformanceReleased(t *testing.T) {
	n, policy := performanceBootedNode(t)
	orig := n.snapshot(t)
	cfg := loadClasses(t, "\n    perf: {governor: performance}\n    eco: {governor: powersave, energyPerformancePreference: power}\n")
	p := n.start(t, cfg, n.kernel)
	p.pass(t, map[int]string{2: "eco"})
	p.pass(t, map[int]string{2: "perf"})
	p.want.set(nil)
	for range 6 {
		_ = p.rec.Flush()
	}
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Empty(t, changed(orig, n.snapshot(t)))
	assert.Empty(t, records)
	assert.Equal(t, "balance_performance", n.kernel.saved[policy])
}
