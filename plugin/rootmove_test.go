package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestNodeMovedFromChartToPackageRestoresPower: docs/install.md advises
// moving a node from the chart (sysfsRoot /host) to the package
// (sysfsRoot /) where keepHostOffIsolcpus must act: the same kernel files
// under another path, the same state directory. The package's daemon,
// configured without power classes, puts the CPUs back as booted: the
// journal's records name their root, where they named
// the chart's paths, which lie outside the package's roots.
func TestNodeMovedFromChartToPackageRestoresPower(t *testing.T) {
	f := newFakeRuntime(t, false)
	chartRoot := f.sysfsRoot(desktop.fixture)
	rp := startPlugin(t, f, poweredDesktop, statePath(f), slowPasses)
	require.NoError(t, rp.p.FlushIsolation())
	requireClass(t, f, cpuset.New(0, 1, 8, 9), saverCPU, "infra saves power")
	rp.stop()
	rp.p.Close()

	// The package's view of the same files: another path to them.
	pkgRoot := filepath.Join(t.TempDir(), "host-root")
	require.NoError(t, os.Symlink(chartRoot, pkgRoot))
	f.mu.Lock()
	f.sysfsRoots[desktop.fixture] = pkgRoot
	f.mu.Unlock()
	second := startPlugin(t, f, desktop, statePath(f), slowPasses)
	require.NoError(t, second.p.FlushIsolation())
	requireClass(t, f, cpuset.New(0, 1, 8, 9), bootedCPU, "no power classes any more: as booted")
	require.Zero(t, second.p.isolation.Load().journal.Len(), "every record restored")
}
