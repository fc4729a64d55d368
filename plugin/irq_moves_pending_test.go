package plugin

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIRQMovesPendingGauge: cpupool_irq_moves_pending counts the IRQs the
// pass moved off a container's CPUs whose move the kernel deferred
// (effective_affinity_list still names a held CPU, issue 42): 1 while IRQ
// 24's next interrupt is due on the held CPU, 0 once that interrupt
// completed the move (a release: irq's TestDeferredMoveReleased).
func TestIRQMovesPendingGauge(t *testing.T) {
	f := irqNode(t)
	rp := startPlugin(t, f, isolatedDesktop, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Zero(t, gauge(t, rp.p, "cpupool_irq_moves_pending"), "nothing held")

	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev/pod": "true"}})
	fwd, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)
	held := cpusOf(t, f, f.cpus(fwd)).List()[0]
	// Where the kernel routes each IRQ before the pass: IRQ 24 (every
	// CPU) to the CPU the container now holds, the others to CPU 0 or
	// their own CPU outside it.
	effective := func(irq, list string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(f.procRoot(), "irq", irq, "effective_affinity_list"), []byte(list+"\n"), 0o644))
	}
	for _, irq := range []string{"0", "25", "26", "27"} {
		effective(irq, "0")
	}
	effective("24", strconv.Itoa(held))
	require.NoError(t, rp.p.FlushIsolation())
	requireIRQsOff(t, f, cpusOf(t, f, f.cpus(fwd)))
	// The fixture's effective_affinity_list stays as it was: the kernel
	// deferred IRQ 24's move.
	assert.Equal(t, 1.0, gauge(t, rp.p, "cpupool_irq_moves_pending"))

	effective("24", "1") // its next interrupt completed the move
	require.NoError(t, rp.p.FlushIsolation())
	assert.Zero(t, gauge(t, rp.p, "cpupool_irq_moves_pending"))
}
