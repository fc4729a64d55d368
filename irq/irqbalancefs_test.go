package irq

import (
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// recordingFS notes every path that reaches the underlying file system.
type recordingFS struct {
	hostfiles.FS
	mu     sync.Mutex
	writes []string
}

func (f *recordingFS) WriteFile(p string, data []byte) error {
	f.mu.Lock()
	f.writes = append(f.writes, p)
	f.mu.Unlock()
	return f.FS.WriteFile(p, data)
}

// TestForgedRecordUnderIrqbalanceRootNeverReachesTheHost:
// IrqbalanceRoot ("/irqbalance") is admitted as a restore root, but
// irqbalanceFS serves only IrqbalancePath; a journal record of any other
// path below it (damaged or forged) was written to the host's real file
// system. So was IrqbalancePath itself when the process had no IRQ
// Source (its record owned by another owner).
func TestForgedRecordUnderIrqbalanceRootNeverReachesTheHost(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, filepath.Join(t.TempDir(), "run-irqbalance"))
	rec := &recordingFS{FS: n.fs}
	j, _, err := hostfiles.OpenJournal(rec, hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	require.NoError(t, j.Commit(map[string]hostfiles.Record{
		IrqbalanceRoot + "/forged": {Original: "x", Owner: Owner},
	}, nil))
	r := hostfiles.NewReconciler(n.src.FS(rec), j, n.log, hostfiles.DefaultTiming, n.src)
	t.Cleanup(r.Close)
	r.RestoreOnlyUnder(filepath.Join(n.proc, "irq"), IrqbalanceRoot)
	_ = r.Flush()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.NotContains(t, rec.writes, IrqbalanceRoot+"/forged", "a path of no file system must never reach the host's")
}

// TestNoIRQSourceServesNothingUnderIrqbalanceRoot: without an IRQ Source
// (the plugin's iso.irq nil), IrqbalancePath and its siblings are ENOENT.
func TestNoIRQSourceServesNothingUnderIrqbalanceRoot(t *testing.T) {
	rec := &recordingFS{FS: &kernelFS{refuse: map[string]syscall.Errno{}}}
	var none *Source
	fsys := none.FS(rec)
	for _, p := range []string{IrqbalancePath, IrqbalanceRoot + "/forged", IrqbalanceRoot + "/../irqbalance/x"} {
		assert.ErrorIs(t, fsys.WriteFile(p, []byte("1")), syscall.ENOENT, p)
		_, err := fsys.ReadFile(p)
		assert.ErrorIs(t, err, syscall.ENOENT, p)
	}
	assert.Empty(t, rec.writes)
}
