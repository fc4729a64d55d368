package power

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerformanceGovernorAndPreferenceRestored (review rvB, H2): a class
// that sets the performance governor and, explicitly, the performance
// preference (a latency class written out in full). The preference's
// original (balance_performance) is recorded before the governor is
// written. On release the restores run in descending Order: the
// preference (2) first, under the performance governor still in force,
// which intel_pstate refuses (EBUSY, transient); a transient restore
// holds back the owner's lower Orders, so the governor (0) is never put
// back, and the preference is refused again at every retry.
func TestPerformanceGovernorAndPreferenceRestored(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	orig := n.snapshot(t)
	p := n.start(t, loadClasses(t, "\n    turbo: {governor: performance, energyPerformancePreference: performance}\n"), n.kernel)
	p.pass(t, map[int]string{2: "turbo"})
	assert.Equal(t, "performance", n.read(t, n.cpu(2, "cpufreq/scaling_governor")))
	p.want.set(nil)
	for range 4 {
		_ = p.rec.Flush()
	}
	assert.Empty(t, changed(orig, n.snapshot(t)), "every file back to its original")
	assert.Empty(t, p.rec.Status().Failures)

	// A restart (or restore-host, which is a process wanting nothing)
	// does the same: the deadlock outlives the process.
	p.rec.Close()
	q := n.start(t, loadClasses(t, "\n    turbo: {governor: performance, energyPerformancePreference: performance}\n"), n.kernel)
	for range 4 {
		_ = q.rec.Flush()
	}
	assert.Empty(t, changed(orig, n.snapshot(t)), "a new process wanting nothing puts every file back")
}

// TestPerformancePreferenceAfterPerformanceGovernor: the same class
// given to a CPU whose governor the plugin set to performance already
// (another class before it) is planned at once, not left for a later pass
// at every pass: the pass keeps the governor at performance, under which
// the preference shows the class's performance.
func TestPerformancePreferenceAfterPerformanceGovernor(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	orig := n.snapshot(t)
	p := n.start(t, loadClasses(t, "\n    turbo: {governor: performance, energyPerformancePreference: performance}\n"), n.kernel)
	p.pass(t, map[int]string{2: "low-latency"})
	p.pass(t, map[int]string{2: "turbo"})
	plan, err := p.src.Plan()
	require.NoError(t, err)
	assert.False(t, plan.Pending, "nothing left for a later pass")
	p.pass(t, nil)
	assert.Empty(t, changed(orig, n.snapshot(t)), "every file back to its original")
}
