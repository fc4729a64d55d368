package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/procfixture"
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

const restoreBoot = "5b0e8c1a-3f2d-4e6a-9b7c-1d2e3f4a5b6c"

// restoreNode is a desktop fixture whose IRQ 24 the plugin moved to CPUs
// 0-1 (its original, every CPU, in the journal), and the config that
// points restore-host at it (irqbalance off: no socket of this machine's
// is told anything).
func restoreNode(t *testing.T) (cfgPath, stateFile, affinity string) {
	t.Helper()
	dir := t.TempDir()
	all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	proc := procfixture.Write(t, filepath.Join(dir, "proc"), procfixture.Spec{CPUs: all, BootID: restoreBoot,
		IRQs: []procfixture.IRQ{{N: 24, Affinity: all, Node: 0, Description: "PCI-MSI 1-edge eth0", Counts: map[int]uint64{0: 10}}}})
	stateFile = filepath.Join(dir, "state", "state.json")
	cgroup := filepath.Join(dir, "cgroup")
	require.NoError(t, os.MkdirAll(cgroup, 0o755))
	cfgPath = filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("stateFile: "+stateFile+"\nprocRoot: "+proc+"\nsysfsRoot: "+fixture.Root(t, "desktop-8c16t")+
		"\ncgroupRoot: "+cgroup+"\nirq: {irqbalance: \"off\"}\n"), 0o644))
	affinity = filepath.Join(proc, "irq", "24", "smp_affinity_list")
	j, _, err := hostfiles.OpenJournal(hostfiles.OS{}, hostfiles.JournalPath(stateFile), restoreBoot)
	require.NoError(t, err)
	require.NoError(t, j.Commit(map[string]hostfiles.Record{affinity: {Original: "0-15", Owner: "irq"}}, nil))
	require.NoError(t, os.WriteFile(affinity, []byte("0-1\n"), 0o644))
	return cfgPath, stateFile, affinity
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

// TestRestoreHostPutsTheOriginalsBack: restore-host writes the journal's
// originals back, says so, and leaves the journal empty; run again, it has
// nothing to do (exit 0 both times).
func TestRestoreHostPutsTheOriginalsBack(t *testing.T) {
	cfgPath, stateFile, affinity := restoreNode(t)
	code, out, errOut := run(t, "restore-host", "--config", cfgPath)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "restored  "+affinity+" (irq): 0-15\n")
	assert.Contains(t, out, "1 host file handled from "+hostfiles.JournalPath(stateFile)+", 0 files left")
	assert.Equal(t, "0-15", readTrim(t, affinity))
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(stateFile), restoreBoot)
	require.NoError(t, err)
	assert.Empty(t, records)

	code, out, errOut = run(t, "restore-host", "--config", cfgPath)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "nothing to restore: the journal "+hostfiles.JournalPath(stateFile)+" holds no record")
}

// TestRestoreHostRefusals: a running daemon (it holds the state
// directory's lock) is refused, naming it, with nothing written; a
// journal that cannot be decoded is an error that leaves it in place; a
// missing journal and one of an earlier boot have nothing to restore.
func TestRestoreHostRefusals(t *testing.T) {
	t.Run("daemon running", func(t *testing.T) {
		cfgPath, stateFile, affinity := restoreNode(t)
		lock, err := state.TryLock(stateFile)
		require.NoError(t, err)
		defer lock.Close()
		code, out, errOut := run(t, "restore-host", "--config", cfgPath)
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "nri-cpupool restore-host: nri-cpupool runs on this state directory ("+state.LockPath(stateFile)+" is held by pid ")
		assert.Contains(t, errOut, "stop it first")
		assert.Equal(t, "0-1", readTrim(t, affinity), "nothing written")
	})
	t.Run("corrupt journal", func(t *testing.T) {
		cfgPath, stateFile, affinity := restoreNode(t)
		journal := hostfiles.JournalPath(stateFile)
		require.NoError(t, os.WriteFile(journal, []byte(`{"version":1,"checksum":"sha256:`), 0o600))
		code, out, errOut := run(t, "restore-host", "--config", cfgPath)
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "journal "+journal+": not valid JSON (truncated?)")
		assert.Contains(t, errOut, "nothing restored")
		assert.Equal(t, "0-1", readTrim(t, affinity))
		assert.Equal(t, `{"version":1,"checksum":"sha256:`, readTrim(t, journal), "left in place, not moved aside")
	})
	t.Run("no journal", func(t *testing.T) {
		cfgPath, stateFile, _ := restoreNode(t)
		require.NoError(t, os.Remove(hostfiles.JournalPath(stateFile)))
		code, out, errOut := run(t, "restore-host", "--config", cfgPath)
		assert.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "nothing to restore: no journal "+hostfiles.JournalPath(stateFile))
	})
	t.Run("earlier boot", func(t *testing.T) {
		cfgPath, stateFile, affinity := restoreNode(t)
		proc := filepath.Dir(filepath.Dir(filepath.Dir(affinity)))
		require.NoError(t, os.WriteFile(filepath.Join(proc, "sys/kernel/random/boot_id"), []byte("another-boot\n"), 0o644))
		code, out, errOut := run(t, "restore-host", "--config", cfgPath)
		assert.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "nothing to restore: "+hostfiles.JournalPath(stateFile)+" holds 1 record of an earlier boot")
		assert.Equal(t, "0-1", readTrim(t, affinity), "a reboot reset it: not written")
	})
	t.Run("config missing", func(t *testing.T) {
		code, _, errOut := run(t, "restore-host", "--config", filepath.Join(t.TempDir(), "nope.yaml"))
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "nope.yaml")
	})
}

// TestRestoreHostJSON: --json carries the journal, each record restored
// with its outcome, and what is left.
func TestRestoreHostJSON(t *testing.T) {
	cfgPath, stateFile, affinity := restoreNode(t)
	code, out, errOut := run(t, "restore-host", "--config", cfgPath, "--json")
	require.Equal(t, 0, code, errOut)
	var got plugin.HostRestore
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, plugin.HostRestore{Journal: hostfiles.JournalPath(stateFile), Left: []plugin.LeftFile{},
		Restored: []plugin.RestoredFile{{Path: affinity, Owner: "irq", Original: "0-15", Outcome: "restored"}}}, got)
}

// TestRestoreHostRefusedConfig: a node config that run refuses (here a key
// this build does not know, as after a downgrade) is an error for
// restore-host, exit 1 with the config's problem and the way on, nothing
// written: the built-in defaults' state file and roots are not the
// daemon's, so with them the node's journal reads as missing or of an
// earlier boot, and an exit 0 would let a package's removal go on with
// nothing put back. Given --state-file and every root
// flag, the config is not needed: a warning, and the restore runs.
func TestRestoreHostRefusedConfig(t *testing.T) {
	refused := func(t *testing.T) (cfgPath, stateFile, affinity string) {
		cfgPath, stateFile, affinity = restoreNode(t)
		data, err := os.ReadFile(cfgPath)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(cfgPath, append(data, []byte("aKeyOfANewerBuild: 1\n")...), 0o644))
		return cfgPath, stateFile, affinity
	}
	t.Run("some flags missing", func(t *testing.T) {
		cfgPath, stateFile, affinity := refused(t)
		code, out, errOut := run(t, "restore-host", "--config", cfgPath, "--state-file", stateFile)
		assert.Equal(t, 1, code, out)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "aKeyOfANewerBuild", "the config's problem")
		assert.Contains(t, errOut, "nothing restored")
		assert.Contains(t, errOut, "--proc-root, --sysfs-root and --cgroup-root", "the flags still missing")
		assert.Equal(t, "0-1", readTrim(t, affinity), "nothing written")
		records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(stateFile), restoreBoot)
		require.NoError(t, err)
		assert.Len(t, records, 1, "the journal keeps its record")
	})
	t.Run("every flag given", func(t *testing.T) {
		cfgPath, stateFile, affinity := refused(t)
		cfg, err := os.ReadFile(cfgPath)
		require.NoError(t, err)
		roots := map[string]string{}
		for _, line := range strings.Split(string(cfg), "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok {
				roots[k] = v
			}
		}
		code, out, errOut := run(t, "restore-host", "--config", cfgPath, "--state-file", stateFile,
			"--proc-root", roots["procRoot"], "--sysfs-root", roots["sysfsRoot"], "--cgroup-root", roots["cgroupRoot"])
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, errOut, "warning: ")
		assert.Contains(t, errOut, "aKeyOfANewerBuild")
		assert.Contains(t, out, "restored  "+affinity+" (irq): 0-15\n")
		assert.Equal(t, "0-15", readTrim(t, affinity))
	})
}

// TestRestoreHostWidenedLine: a cgroup given its parent's CPUs for an
// empty original the kernel would not take back says so, not that the
// file belongs to something else now.
func TestRestoreHostWidenedLine(t *testing.T) {
	var out strings.Builder
	writeHostRestore(&out, &plugin.HostRestore{Journal: "j", Restored: []plugin.RestoredFile{{Path: "/sys/fs/cgroup/system/cpuset.cpus", Owner: "housekeeping", Outcome: "widened"}}})
	assert.Contains(t, out.String(), "widened   /sys/fs/cgroup/system/cpuset.cpus (housekeeping): its parent's CPUs")
}
