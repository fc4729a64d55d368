package hostfiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestoreAlsoWhere: a rule admits files of its shape outside the
// roots, and only when both the path and the path its symlinks lead to
// are of that shape: a record reached through a symlink of the right
// name, leading to a file of another shape, is not written.
func TestRestoreAlsoWhere(t *testing.T) {
	tr := newTree(t, map[string]string{"devices/pci0/net/eth0/rps_cpus": "ff", "devices/pci0/remove": "0", "irq/24/smp_affinity_list": "0-3"})
	for name, v := range map[string]string{"devices/pci0/net/eth0/rps_cpus": "0f", "irq/24/smp_affinity_list": "0-1"} {
		require.NoError(t, os.WriteFile(tr.path(name), []byte(v+"\n"), 0o644))
	}
	// class/net/eth0 → the device's directory; class/net/evil/rps_cpus →
	// the device's remove.
	require.NoError(t, os.MkdirAll(tr.path("class/net/evil"), 0o755))
	require.NoError(t, os.Symlink(tr.path("devices/pci0/net/eth0"), tr.path("class/net/eth0")))
	require.NoError(t, os.Symlink(tr.path("devices/pci0/remove"), tr.path("class/net/evil/rps_cpus")))
	damagedJournal(t, tr, map[string]Record{
		tr.path("class/net/eth0/rps_cpus"):  {Original: "ff", Owner: "rps"},
		tr.path("class/net/evil/rps_cpus"):  {Original: "1", Owner: "rps"},
		tr.path("devices/pci0/remove"):      {Original: "1", Owner: "rps"},
		tr.path("irq/24/smp_affinity_list"): {Original: "0-3", Owner: "irq"},
	})
	in := openInstance(t, OS{}, tr, bootA)
	in.r.RestoreOnlyUnder(tr.path("irq"))
	in.r.RestoreAlsoWhere(func(path string) bool {
		return strings.HasSuffix(path, "/rps_cpus") && filepath.Base(filepath.Dir(filepath.Dir(path))) == "net"
	})
	require.NoError(t, in.r.Flush())
	tr.requireOriginals(t, "restored")
	var untrusted []string
	for _, f := range in.r.Status().Failures {
		if f.Untrusted {
			untrusted = append(untrusted, f.Path)
		}
	}
	assert.ElementsMatch(t, []string{tr.path("class/net/evil/rps_cpus"), tr.path("devices/pci0/remove")}, untrusted)
}
