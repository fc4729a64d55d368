package power

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPreferenceHeldUnderAdminPerformanceIsReported: CPU
// 4 had the saver class (its preference power, original
// balance_performance); an admin set its governor to performance (tuned),
// and the class ends. The driver refuses the preference's restore (EBUSY
// under performance), so it is held with its record. The hold was silent:
// no failure, no warning, only a record count. It is logged once, whatever
// the passes, and the Source's Report (restore-host's reason) says why;
// once the admin switches the governor back, the next rescan restores
// the preference and the hold is gone.
func TestPreferenceHeldUnderAdminPerformanceIsReported(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	p := n.start(t, loadClasses(t, ""), n.kernel)
	p.pass(t, map[int]string{4: "saver"})
	epp := n.cpu(4, "cpufreq/energy_performance_preference")
	require.Equal(t, "power", n.read(t, epp))
	require.NoError(t, n.kernel.WriteFile(n.cpu(4, "cpufreq/scaling_governor"), []byte("performance")), "the admin")
	p.want.set(nil)
	for range 3 {
		_ = p.rec.Flush()
	}
	st := p.rec.Status()
	assert.Equal(t, 1, st.Records[Owner], "the preference's record is kept")
	var held []string
	for _, w := range p.warnings() {
		if strings.Contains(w, "energy_performance_preference") {
			held = append(held, w)
		}
	}
	require.Len(t, held, 1, "the hold is logged, once: %q", p.warnings())
	assert.Contains(t, held[0], `original "balance_performance"`)
	assert.Contains(t, held[0], "governor of policy4 is performance")
	reported := p.src.Report().Held
	require.Len(t, reported, 1)
	for path, why := range reported {
		assert.Contains(t, path, "policy4/energy_performance_preference")
		assert.Equal(t, why, p.src.Held(path))
		assert.Contains(t, why, "EBUSY")
	}

	// The admin switches back: the driver gives the CPU the preference it
	// had before performance, the class's power; the next rescan restores.
	require.NoError(t, n.kernel.WriteFile(n.cpu(4, "cpufreq/scaling_governor"), []byte("powersave")))
	assert.Equal(t, "power", n.read(t, epp), "the class's value is back in force")
	require.NoError(t, p.rec.Flush())
	assert.Equal(t, "balance_performance", n.read(t, epp))
	assert.Empty(t, p.src.Report().Held, "nothing held any more")
}
