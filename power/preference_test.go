package power

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// TestPerformanceGovernorAndPreferenceRestored: a class
// that sets the performance governor and, explicitly, the performance
// preference (a latency class written out in full). The preference's
// original (balance_performance) is recorded before the governor is
// written. On release the restores run in descending Order: the
// preference (2) first, under the performance governor still in force,
// which intel_pstate refuses (EBUSY, transient); a transient restore
// holds back the owner's lower Orders, so the governor (0) is never put
// back, and the preference is refused again at every retry.
func TestPerformanceGovernorAndPreferenceRestored(t *testing.T) {
	n, orig, p := turboOnCPU2(t)
	p.want.set(nil)
	for range 4 {
		_ = p.rec.Flush()
	}
	assert.Empty(t, changed(orig, n.snapshot(t)), "every file back to its original")
	assert.Empty(t, p.rec.Status().Failures)
	// A restart before the release: TestRestartRestoresPerformanceGovernorAndPreference.
}

// TestPerformancePreferenceAfterPerformanceGovernor: the same class
// given to a CPU whose governor the plugin set to performance already
// (another class before it) is planned at once, not left for a later pass
// at every pass: the pass keeps the governor at performance, under which
// the preference shows the class's performance.
func TestPerformancePreferenceAfterPerformanceGovernor(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	orig := n.snapshot(t)
	p := n.start(t, loadClasses(t, turboClass), n.kernel)
	p.pass(t, map[int]string{2: "low-latency"})
	p.pass(t, map[int]string{2: "turbo"})
	plan, err := p.src.Plan()
	require.NoError(t, err)
	assert.False(t, plan.Pending, "nothing left for a later pass")
	p.pass(t, nil)
	assert.Empty(t, changed(orig, n.snapshot(t)), "every file back to its original")
}

// TestPreferenceOriginalOnPerformanceBootedNode: a node
// that booted with the performance governor (tuned's latency-performance
// profile, cpupower frequency-set -g performance at boot), whose
// intel_pstate keeps the powersave preference balance_performance in its
// memory while the file shows performance. A class that sets another
// governor and a preference (eco) is given to CPU 2, then taken back.
//
// The preference's original is read BEFORE the pass writes the governor,
// so under the node's performance governor: the journal keeps
// "performance", the driver's display, not the node's preference. The
// restore (descending Order: preference before governor) then WRITES
// "performance" as the preference under the class's powersave governor,
// which the driver keeps as the policy's preference; the governor goes
// back to performance. The files read as before, but the driver's memory
// now holds performance: the next switch to powersave (an admin, tuned)
// runs the CPU at EPP performance instead of the node's
// balance_performance.
// TestPreferenceOriginalNotReadUnderOwnPerformanceGovernor covers only
// the plugin's own performance governor, not the node's.
func TestPreferenceOriginalOnPerformanceBootedNode(t *testing.T) {
	n, policy := performanceBootedNode(t)
	orig := n.snapshot(t)

	p := n.start(t, loadClasses(t, "\n    eco: {governor: powersave, energyPerformancePreference: power}\n"), n.kernel)
	p.pass(t, map[int]string{2: "eco"})
	assert.Equal(t, "powersave", n.read(t, filepath.Join(policy, "scaling_governor")))
	assert.Equal(t, "power", n.read(t, filepath.Join(policy, "energy_performance_preference")))

	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Equal(t, "balance_performance", records[filepath.Join(policy, "energy_performance_preference")].Original,
		"the node's own preference, not the driver's display under the node's performance governor")

	p.pass(t, nil)
	assert.Empty(t, changed(orig, n.snapshot(t)), "every file reads as before")
	assert.Equal(t, "balance_performance", n.kernel.saved[policy],
		"the driver's memory of the policy's preference is the node's again (an admin's switch to powersave gets balance_performance)")
}
