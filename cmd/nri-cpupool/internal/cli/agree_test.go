package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestValidateAcceptsWhatRunStartsWith: the packaged unit runs validate
// before run (ExecStartPre=), so a config run starts with must pass
// validate. A CPU isolatedCPUs names that is offline (a node rebooted with
// a failed core) is a warning for both, saying what and how to fix; it made
// validate exit 1 while run started (issue 41, item 2), and the unit then
// never started: every container ran unpinned.
func TestValidateAcceptsWhatRunStartsWith(t *testing.T) {
	root := fixture.Root(t, "server-offline-isolcpus") // 7, 15 and 31 offline
	cfgFile := writeFile(t, "isolatedCPUs: \"2-7,18-23\"\nreservedCPUs: \"0\"\npools: {shared: {cpus: \"2-3,18-19\"}}\n")
	want := "warning: isolatedCPUs: CPU 7 is offline (online: 0-6,8-14,16-30); the daemon runs without it and it joins the pool when it comes online; if it is gone for good, remove it from the list"

	code, out, errOut := run(t, "validate", "--sysfs-root", root, "--config", cfgFile)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "valid for this node")
	assert.Contains(t, out, "exclusive:              4-6,20-23 (7 CPUs)")
	assert.Contains(t, errOut, want)

	code, out, errOut = run(t, "topology", "--sysfs-root", root, "--config", cfgFile)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out+errOut, want)

	// run's start: the config as run reads it, on the same node, makes a
	// plugin (New lays the pools out with the same check).
	cfg, err := loadRunConfig(cfgFile)
	require.NoError(t, err)
	dir := t.TempDir()
	cfg.SysfsRoot, cfg.StateFile, cfg.CgroupRoot, cfg.ProcRoot = root, filepath.Join(dir, "state.json"), dir, filepath.Join(dir, "proc")
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(io.Discard)
	p, err := plugin.New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	require.NoError(t, err, "run starts with what validate accepts")
	p.Close()

	// And what stops run stops validate: a CPU the node does not have.
	code, _, errOut = run(t, "validate", "--sysfs-root", root, "--config", writeFile(t, "isolatedCPUs: \"2-7,18-40\"\n"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "error: isolatedCPUs: CPUs 32-40 do not exist")
	cfg.IsolatedCPUs = ptr("2-7,18-40")
	_, err = plugin.New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CPUs 32-40 do not exist")
}

func ptr[T any](v T) *T { return &v }

// TestValidateReadsAMissingDefaultFileAsRunDoes: run takes the built-in
// defaults when the default config file is absent; validate checks those
// too, and says so, rather than failing where run would start.
func TestValidateReadsAMissingDefaultFileAsRunDoes(t *testing.T) {
	if _, err := os.Stat(config.DefaultPath); err == nil {
		t.Skipf("%s exists on this machine", config.DefaultPath)
	}
	code, out, errOut := run(t, "validate", "--sysfs-root", fixture.Root(t, "desktop-8c16t"))
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, config.DefaultPath+": valid for this node")
	assert.Contains(t, errOut, "warning: "+config.DefaultPath+" does not exist: checking the built-in defaults, which run uses then")
}

// TestStatusAuditAndExplainReadTheConfigAsRunDoes: the commands that read
// what the daemon wrote read the node's config as run does (review 58,
// item 7): its default file when --config is not given (so the state file,
// proc root, housekeeping and kernel work are the daemon's, not the
// built-in defaults'), a missing default file as the built-in defaults, and
// a missing file given with --config as an error.
func TestStatusAuditAndExplainReadTheConfigAsRunDoes(t *testing.T) {
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	st := state.NewState()
	st.Containers["0123456789abcdef"] = state.ContainerState{PodUID: "u1", PodNamespace: "telco", PodName: "dpdk", Container: "fwd", Pool: "shared", MilliCPU: 500, CPUs: "2-3", Mems: "0"}
	store := state.NewFileStore(stateFile)
	require.NoError(t, store.Save(st))
	store.Close()
	cfgFile := writeFile(t, "stateFile: "+stateFile+"\n")
	refused := writeFile(t, "pools: {sahred: {count: 2}}\n")
	for _, cmd := range []string{"status", "audit", "explain"} {
		code, out, _ := run(t, cmd, "--help")
		require.Equal(t, 0, code, cmd)
		assert.Regexp(t, `-config string\n\s+the node's configuration file, as run reads it .*\(default "`+config.DefaultPath+`"\)`, out, "%s: run's default config file", cmd)

		args := []string{cmd, "--config", cfgFile}
		if cmd == "explain" {
			args = append(args, "telco/dpdk")
		}
		code, out, errOut := run(t, args...)
		require.Equal(t, 0, code, "%s: the config's stateFile: %s", cmd, errOut)
		switch cmd {
		case "status":
			assert.Contains(t, out, "1 container")
		case "audit":
			assert.Contains(t, out, "no exclusive CPU is held")
		case "explain":
			assert.Contains(t, out, "telco/dpdk/fwd: running")
		}

		// A config the daemon would refuse: the state is still read,
		// with the built-in defaults and the flags (what an operator
		// runs when the daemon does not start), and a warning.
		code, out, errOut = run(t, append([]string{cmd, "--config", refused, "--state-file", stateFile}, args[3:]...)...)
		assert.Equal(t, 0, code, "%s: a refused config: %s", cmd, errOut)
		assert.Contains(t, errOut, "line 1: unknown key pools.sahred", cmd)
		assert.Contains(t, errOut, "reads with the built-in defaults and the flags", cmd)
		assert.Contains(t, errOut, "housekeeping and kernel work off", cmd)
		assert.NotEmpty(t, out, cmd)

		// A directory for --config is a mistyped path, as a missing
		// file is: an error.
		code, _, errOut = run(t, append([]string{cmd, "--config", dir, "--state-file", stateFile}, args[3:]...)...)
		assert.Equal(t, 1, code, "%s: a directory for --config: %s", cmd, errOut)

		missing := filepath.Join(dir, "nothere.yaml")
		args[2] = missing
		code, _, errOut = run(t, args...)
		assert.Equal(t, 1, code, "%s: a missing --config file is an error, as for run", cmd)
		assert.Contains(t, errOut, "reading config: open "+missing, cmd)
	}
	if _, err := os.Stat(config.DefaultPath); err == nil {
		t.Skipf("%s exists on this machine", config.DefaultPath)
	}
	code, out, errOut := run(t, "status", "--state-file", stateFile)
	require.Equal(t, 0, code, "a missing default file means the built-in defaults: %s", errOut)
	assert.Contains(t, out, "1 container")
}

// TestValidateAgreesWithRunAfterAHotRemovedCPU: after the hypervisor
// hot-removed vCPU 15 that the config names (isolatedCPUs, a count of
// all of them), run starts again with the unchanged config and lays the
// pools out as before, the CPU an offline one of its pool; validate, which
// the unit runs first, says the same (it read the node without the CPU
// and failed: "CPU 15 does not exist", so the unit never started). A CPU
// never seen present is still an error for both.
func TestValidateAgreesWithRunAfterAHotRemovedCPU(t *testing.T) {
	root := fixture.Root(t, "desktop-8c16t")
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	body := "stateFile: " + stateFile + "\nisolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 12}}\n"
	cfgFile := writeFile(t, body)
	cfg, err := loadRunConfig(cfgFile)
	require.NoError(t, err)
	cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot = root, dir, filepath.Join(dir, "proc")
	log := logrus.New()
	log.SetOutput(io.Discard)
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	// What the daemon remembers at its first Synchronize (plugin's
	// hotplug_removed_restart_test runs that part through the runtime).
	rec, _ := topo.Remember(sysfs.Remembered{})
	require.NoError(t, sysfs.WriteRemembered(sysfs.RememberedPath(stateFile), rec))

	cpuDir := filepath.Join(root, "sys/devices/system/cpu")
	for _, f := range []string{"present", "online"} {
		require.NoError(t, os.WriteFile(filepath.Join(cpuDir, f), []byte("0-14\n"), 0o644))
	}
	require.NoError(t, os.RemoveAll(filepath.Join(cpuDir, "cpu15")))

	code, out, errOut := run(t, "validate", "--sysfs-root", root, "--config", cfgFile)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "exclusive:              2-7,10-14 (11 CPUs)")
	assert.Contains(t, errOut, "warning: pools: CPU 15 is configured but not present (hot-removed)")

	topo, err = sysfs.Discover(root)
	require.NoError(t, err)
	p, err := plugin.New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	require.NoError(t, err, "run starts with what validate accepts")
	_, l := p.Layout()
	assert.Equal(t, "2-7,10-14", l.Exclusive.String())
	p.Close()

	code, _, errOut = run(t, "validate", "--sysfs-root", root, "--config", writeFile(t, strings.Replace(body, `"0,8"`, `"0,8,16"`, 1)))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "error: reservedCPUs: CPU 16 does not exist")
}
