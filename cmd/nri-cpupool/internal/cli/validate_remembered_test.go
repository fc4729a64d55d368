package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestValidateListsTheRememberedCPUsTheDaemonDrops: entries of
// present-cpus.json that cannot be put back in their pools (a negative or
// repeated CPU id, a hot-removed CPU on a NUMA node this node does not
// have: a hand-edited or copied record) are dropped by the daemon, which
// warns once at its start; validate, which the unit runs first, said
// nothing of them, so the one who checks a node before a restart did not
// learn that a hot-removed CPU would not be put back. validate lists each
// one, with the file and how to fix it, on stderr; its other lines and its
// exit code stay as they were.
func TestValidateListsTheRememberedCPUsTheDaemonDrops(t *testing.T) {
	root := fixture.Root(t, "desktop-8c16t")
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	cfgFile := writeFile(t, "stateFile: "+stateFile+"\nisolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 12}}\n")
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	clean, _ := topo.Remember(sysfs.Remembered{})
	recPath := sysfs.RememberedPath(stateFile)
	require.NoError(t, sysfs.WriteRemembered(recPath, clean))

	// The CPUs are all present: a negative and a repeated id are dropped
	// without changing the layout.
	code, wantOut, wantErr := run(t, "validate", "--sysfs-root", root, "--config", cfgFile)
	require.Equal(t, 0, code, wantErr)
	bad := clean
	bad.CPUs = append([]sysfs.RememberedCPU{{ID: -1}}, clean.CPUs...)
	bad.CPUs = append(bad.CPUs, clean.CPUs[3])
	require.NoError(t, sysfs.WriteRemembered(recPath, bad))
	code, out, errOut := run(t, "validate", "--sysfs-root", root, "--config", cfgFile)
	assert.Equal(t, 0, code, "dropped entries are warnings, as for the daemon")
	assert.Equal(t, wantOut, out, "stdout unchanged")
	assert.True(t, strings.HasSuffix(errOut, wantErr), "the existing stderr lines stay, after the record's:\n%s", errOut)
	added := strings.TrimSuffix(errOut, wantErr)
	t.Logf("added:\n%s", added)
	assert.Contains(t, added, "warning: "+recPath+": 2 entries of the remembered CPUs are not put back in their pools")
	assert.Contains(t, added, "\n  CPU -1: a negative CPU id\n")
	assert.Contains(t, added, "\n  CPU 3: listed again (the first entry is kept)\n")
	assert.Contains(t, added, "delete "+recPath+" while the daemon is stopped")

	// Hot-removed CPU 15, remembered on a NUMA node this node lacks: not
	// put back, so the config's isolatedCPUs names a CPU that does not
	// exist, and validate says why.
	cpuDir := filepath.Join(root, "sys/devices/system/cpu")
	for _, f := range []string{"present", "online"} {
		require.NoError(t, os.WriteFile(filepath.Join(cpuDir, f), []byte("0-14\n"), 0o644))
	}
	require.NoError(t, os.RemoveAll(filepath.Join(cpuDir, "cpu15")))
	moved := clean
	moved.CPUs = append([]sysfs.RememberedCPU(nil), clean.CPUs...)
	require.Equal(t, 15, moved.CPUs[15].ID)
	moved.CPUs[15].NUMA = 7
	require.NoError(t, sysfs.WriteRemembered(recPath, moved))
	code, _, errOut = run(t, "validate", "--sysfs-root", root, "--config", cfgFile)
	t.Logf("stderr:\n%s", errOut)
	assert.Equal(t, 1, code, "CPU 15 is not put back: the config names a CPU that does not exist, as run would say")
	assert.Contains(t, errOut, "warning: "+recPath+": 1 entry of the remembered CPUs is not put back in its pool")
	assert.Contains(t, errOut, "\n  CPU 15: on NUMA node 7, which this node does not have\n")
}

// A directory where present-cpus.json belongs: validate, which the unit
// runs first, says what the daemon says at its start (the path, that it
// is a directory, and to remove it), and checks the config on the node as
// it is, as the daemon then lays it out: the exit code is that of the
// config alone.
func TestValidateSaysARememberedCPUsPathThatIsADirectoryAndHowToFixIt(t *testing.T) {
	root := fixture.Root(t, "desktop-8c16t")
	stateFile := filepath.Join(t.TempDir(), "state.json")
	cfgFile := writeFile(t, "stateFile: "+stateFile+"\nisolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 12}}\n")
	code, wantOut, _ := run(t, "validate", "--sysfs-root", root, "--config", cfgFile)
	require.Equal(t, 0, code)
	recPath := sysfs.RememberedPath(stateFile)
	require.NoError(t, os.Mkdir(recPath, 0o700))
	code, out, errOut := run(t, "validate", "--sysfs-root", root, "--config", cfgFile)
	t.Logf("stderr:\n%s", errOut)
	assert.Equal(t, 0, code)
	assert.Equal(t, wantOut, out, "the layout is the node's as it is")
	assert.Contains(t, errOut, "warning: reading the remembered CPUs: "+recPath+": a directory, not a regular file")
	assert.Contains(t, errOut, "remove it, and the daemon writes the record there")
	assert.Equal(t, 1, strings.Count(errOut, recPath), "said once")
}
