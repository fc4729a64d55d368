package irq

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIRQsListedAtRescan: a pass kicked by a change that bans no CPU
// anew (a release) plans the IRQs the last rescan listed, without listing
// /proc/irq again; an IRQ a driver requests later is found and kept off
// the banned CPUs by the next rescan (or by a grant's pass:
// TestGrantMovesIRQsRequestedSinceTheRescan), and one freed meanwhile is
// a file gone, which a kicked pass passes over.
func TestIRQsListedAtRescan(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	n.ban(2, 3) // a full pass (Flush)
	assert.Equal(t, "0-1,4-7", n.affinity("24"))

	// A driver is loaded: IRQ 30, on every CPU; IRQ 28 is freed.
	dir := filepath.Join(n.proc, "irq", "30")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "eth0-rx-0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "smp_affinity_list"), []byte("0-7\n"), 0o644))
	require.NoError(t, os.RemoveAll(filepath.Join(n.proc, "irq", "28")))
	n.src.SetBanned(cpuset.New(2)) // CPU 3 released
	require.NoError(t, n.r.FlushKicked())
	assert.Equal(t, "0-7", n.affinity("30"), "the kicked pass did not list /proc/irq again")
	assert.Empty(t, n.r.Status().LastError, "the IRQ freed is no error")

	require.NoError(t, n.r.Flush())
	assert.Equal(t, "0-1,3-7", n.affinity("30"), "the rescan found the new IRQ")
}
