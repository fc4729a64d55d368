package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// heldPreferenceNode is restoreNode whose CPU 2's governor reads
// performance, with the preference the driver shows under it, and whose
// journal holds records of power: the preference's original
// balance_performance, and the given others. It returns the config, the
// policy's directory and the journal's path.
func heldPreferenceNode(t *testing.T, more map[string]hostfiles.Record) (cfgPath, policy, journal string) {
	t.Helper()
	cfgPath, stateFile, _ := restoreNode(t)
	data, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	sysfsRoot := regexp.MustCompile(`(?m)^sysfsRoot: (.*)$`).FindStringSubmatch(string(data))[1]
	policy = filepath.Join(sysfsRoot, "sys/devices/system/cpu/cpufreq/policy2")
	require.NoError(t, os.WriteFile(filepath.Join(policy, "scaling_governor"), []byte("performance\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(policy, "energy_performance_preference"), []byte("performance\n"), 0o644))
	records := map[string]hostfiles.Record{filepath.Join(policy, "energy_performance_preference"): {Original: "balance_performance", Owner: "power", Order: 2}}
	for path, rec := range more {
		records[filepath.Join(policy, path)] = rec
	}
	journal = hostfiles.JournalPath(stateFile)
	j, _, err := hostfiles.OpenJournal(hostfiles.OS{}, journal, restoreBoot)
	require.NoError(t, err)
	require.NoError(t, j.Commit(records, nil))
	return cfgPath, policy, journal
}

// TestRestoreHostNamesTheGovernorHoldingAPreference: a
// class set CPU 2's preference to power (original balance_performance);
// an admin (tuned's latency-performance) then set the policy's governor
// to performance, under which intel_pstate refuses any other preference.
// restore-host cannot restore it: power holds it as it reads. It was
// listed LEFT "not restored in 5 passes" after one pass, naming neither
// the governor nor what to do. The reason now says the governor holds
// it, and how to restore it; once the governor is switched away (the
// driver gives the plugin's preference back), a second run restores it.
func TestRestoreHostNamesTheGovernorHoldingAPreference(t *testing.T) {
	cfgPath, policy, journal := heldPreferenceNode(t, nil)
	code, out, errOut := run(t, "restore-host", "--config", cfgPath)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Equal(t, 1, code, "the preference is left")
	assert.Regexp(t, `LEFT +\S+policy2/energy_performance_preference \(power\): original balance_performance: held: the governor of policy2 is performance, under which the driver refuses any other preference \(EBUSY\); switch the governor away from performance .*and run restore-host again`, out)
	assert.NotContains(t, out, "passes", "one pass ran")

	// The operator switches the governor away: the driver gives the
	// policy the preference it had before performance, the plugin's.
	require.NoError(t, os.WriteFile(filepath.Join(policy, "scaling_governor"), []byte("powersave\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(policy, "energy_performance_preference"), []byte("power\n"), 0o644))
	code, out, _ = run(t, "restore-host", "--config", cfgPath)
	assert.Equal(t, 0, code, out)
	assert.Equal(t, "balance_performance", readTrim(t, filepath.Join(policy, "energy_performance_preference")))
	records, _, _, err := hostfiles.ReadJournal(journal, restoreBoot)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestRestoreHostHeldPreferenceWithItsGovernorsRecord:
// the journal an earlier build left on a node booted with the
// performance governor whose CPU 2 went from a powersave class with a
// preference to one with the performance governor and preference:
// governor's original performance, preference's balance_performance. The
// governor's restore changes nothing, and the preference stays held: it
// is LEFT with the governor named (the driver remembers the plugin's
// preference; only a switch away from performance lets it be restored),
// not as a record a later pass would restore by itself.
func TestRestoreHostHeldPreferenceWithItsGovernorsRecord(t *testing.T) {
	cfgPath, policy, _ := heldPreferenceNode(t, map[string]hostfiles.Record{"scaling_governor": {Original: "performance", Owner: "power", Order: 0}})
	code, out, errOut := run(t, "restore-host", "--config", cfgPath)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "restored  "+filepath.Join(policy, "scaling_governor")+" (power): performance")
	assert.Contains(t, out, "held: the governor of policy2 is performance")
}
