package irq

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGrantMovesIRQsIrqbalancePlacedSinceTheRescan: irqbalance places
// IRQs anywhere outside the banned CPUs, at any time, so what a pass last
// read of an IRQ's affinity says nothing of where it is once a CPU that
// was allowed becomes banned. The pass kicked by that grant must move the
// IRQ off the newly exclusive CPU, not take the affinity it read before as
// settled until the next rescan (isolation is never loosened for a pass).
func TestGrantMovesIRQsIrqbalancePlacedSinceTheRescan(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.ban(6, 7) // a full pass: IRQ 27 read on CPU 3
	require.Equal(t, "3", n.affinity("27"))

	n.setAffinity("27", "1") // irqbalance moves it to CPU 1, allowed then
	n.src.SetBanned(cpuset.New(1, 6, 7))
	require.NoError(t, n.r.FlushKicked()) // the grant of CPU 1
	assert.Equal(t, "0,2-5", n.affinity("27"), "IRQ 27 moved off CPU 1, which the grant made exclusive, to the online CPUs less the banned ones")
}

// TestGrantMovesIRQsRequestedSinceTheRescan: a driver requests an IRQ
// after the last rescan (a DPDK pod's vfio vectors), on CPUs allowed
// then. The pass kicked by a grant that bans one of them must find it, as
// every pass did before the IRQ list was kept between rescans.
func TestGrantMovesIRQsRequestedSinceTheRescan(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.ban(6, 7)

	dir := filepath.Join(n.proc, "irq", "30")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "vfio-msix[0]"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "smp_affinity_list"), []byte("0-5\n"), 0o644))
	n.src.SetBanned(cpuset.New(1, 6, 7))
	require.NoError(t, n.r.FlushKicked())
	assert.Equal(t, "0,2-5", n.affinity("30"), "the grant's pass moved the new IRQ off CPU 1")
}
