package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	nrilog "github.com/containerd/nri/pkg/log"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
)

// TestHelpGoesToStdout: help that is asked for is output (stdout, exit 0),
// as with Go's own tools, so that `nri-cpupool --help | less` shows it; a
// misuse is an error: its message and usage on stderr, exit 2 (issue 43,
// item 5).
func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"status", "--help"}, {"audit", "-h"}, {"run", "--help"}, {"version", "-help"}} {
		code, out, errOut := run(t, args...)
		assert.Equal(t, 0, code, "%v", args)
		assert.Contains(t, out, "Usage: nri-cpupool", "%v: help on stdout", args)
		assert.Empty(t, errOut, "%v: nothing on stderr", args)
	}
	for _, args := range [][]string{{}, {"nosuch"}, {"status", "--nosuch"}, {"status", "stray"}, {"audit", "--sample", "5"}} {
		code, out, errOut := run(t, args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Empty(t, out, "%v: nothing on stdout", args)
		assert.Contains(t, errOut, "Usage: nri-cpupool", "%v: usage on stderr", args)
	}
}

// TestBadDurationSaysWhatIsExpected: `--sample 5` names the flag, the
// value and what a duration is, not the flag package's "parse error".
func TestBadDurationSaysWhatIsExpected(t *testing.T) {
	code, _, errOut := run(t, "audit", "--sample", "5")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `invalid value "5" for flag -sample: want a duration with its unit, such as 500ms, 2s or 1m`)
	assert.NotContains(t, errOut, "parse error")
}

// TestSampleOutOfRangeIsAMisuse: --sample takes 1ms to 1m, as its message
// says; a value outside is a bad flag value like any other: exit 2 with
// the usage, before anything is read (review 58, item 9: 2m, 0s and -1s
// were exit 1, and 100us was taken).
func TestSampleOutOfRangeIsAMisuse(t *testing.T) {
	for _, v := range []string{"2m", "1m1ms", "0s", "-1s", "100us", "999us"} {
		code, out, errOut := run(t, "audit", "--sample", v)
		assert.Equal(t, 2, code, v)
		assert.Empty(t, out, v)
		assert.Contains(t, errOut, `invalid value "`+v+`" for flag -sample: want a duration between 1ms and 1m`+"\n", v)
		assert.Contains(t, errOut, "Usage: nri-cpupool audit", v)
	}
	for _, v := range []string{"1ms", "1m"} {
		code, _, errOut := run(t, "audit", "--sample", v, "--state-file", filepath.Join(t.TempDir(), "none.json"))
		assert.Equal(t, 1, code, v)
		assert.Contains(t, errOut, "is the plugin running with this --state-file?", "%s is in range: audit goes on to read the state", v)
	}
}

// TestRunTakesRelativePaths: run takes a relative --sysfs-root (and
// --state-file, --cgroup-root, --nri-socket) as the other commands do,
// resolved against the working directory, instead of refusing it as "not
// an absolute path" (issue 43, item 5). The bad log level stops it before
// it starts.
func TestRunTakesRelativePaths(t *testing.T) {
	code, _, errOut := run(t, "run", "--config", writeFile(t, ""), "--log-level", "loud",
		"--sysfs-root", "fixture", "--state-file", "state/state.json", "--cgroup-root", "cg", "--nri-socket", "nri.sock")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `invalid value "loud" for flag -log-level: unknown level "loud"`)
	assert.NotContains(t, errOut, "not an absolute path")

	wd, err := os.Getwd()
	require.NoError(t, err)
	o := runOverrides{sysfsRoot: "fixture", stateFile: "state/state.json", logLevel: "debug"}
	require.NoError(t, o.resolve())
	got, err := runConfigLoader(writeFile(t, ""), o)()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "fixture"), got.SysfsRoot)
	assert.Equal(t, filepath.Join(wd, "state/state.json"), got.StateFile)
	assert.Equal(t, "debug", got.LogLevel)
	assert.Equal(t, config.Default().CgroupRoot, got.CgroupRoot, "an empty flag leaves the config's")
}

// TestDaemonLogTakesTheNRILibrarysLines: the NRI library's lines reach the
// daemon's log in its time format (milliseconds), not logrus's standard
// logger in seconds, and the stub's "Created plugin", which it says at
// every reconnect, is at info once (issue 43, item 5).
func TestDaemonLogTakesTheNRILibrarysLines(t *testing.T) {
	defer nrilog.Set(nrilog.Get())
	var out bytes.Buffer
	_, q := daemonLog(&out, "info")
	for range 3 {
		nrilog.Infof(context.Background(), "Created plugin %s", "10-cpupool")
	}
	q.Close()
	assert.Equal(t, 1, strings.Count(out.String(), "Created plugin"), out.String())
	assert.Regexp(t, `^time="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}.*component=nri`, out.String())
}

// TestFlagErrorsNameTheFlag: a bad value of a flag that stands for a
// config key is a bad flag value, named as the flag (exit 2), not an
// invalid config naming the key; what the node refuses of simulate's
// --isolated-cpus names the flag too (review 58, item 14).
func TestFlagErrorsNameTheFlag(t *testing.T) {
	code, out, errOut := run(t, "run", "--log-level", "loud")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasPrefix(errOut, `invalid value "loud" for flag -log-level: unknown level "loud"; use trace, debug, info, warn or error`+"\nUsage: nri-cpupool run"), errOut)
	assert.NotContains(t, errOut, "logLevel:")

	requests := writeFile(t, "steps:\n  - remove: {pod: a}\n")
	code, out, errOut = run(t, "simulate", "--topology", "vm-2cpu", "--isolated-cpus", "1-x", "--requests", requests)
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasPrefix(errOut, `invalid value "1-x" for flag -isolated-cpus: malformed CPU list "1-x"`), errOut)
	assert.NotContains(t, errOut, "isolatedCPUs:")

	code, _, errOut = run(t, "simulate", "--topology", "vm-2cpu", "--isolated-cpus", "7", "--requests", requests)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "error: --isolated-cpus: CPU 7 does not exist on this node (present: 0-1)")
	assert.NotContains(t, errOut, "isolatedCPUs:")
}

// TestVersionFlag: `nri-cpupool --version` is `nri-cpupool version`, not
// an unknown command (review 58, item 14).
func TestVersionFlag(t *testing.T) {
	code, want, _ := run(t, "version")
	require.Equal(t, 0, code)
	for _, flag := range []string{"--version", "-version"} {
		code, out, errOut := run(t, flag)
		assert.Equal(t, 0, code, flag)
		assert.Equal(t, want, out, flag)
		assert.Empty(t, errOut, flag)
	}
}

// TestStatusHelpSaysWhatSysfsRootIsFor: --sysfs-root is read without
// --map too (the offline CPUs), so the usage does not put it under --map
// (review 58, item 14).
func TestStatusHelpSaysWhatSysfsRootIsFor(t *testing.T) {
	code, out, _ := run(t, "status", "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "Usage: nri-cpupool status [--config F] [--state-file F] [--sysfs-root D] [--json | --map [--color WHEN]]\n")
	assert.Contains(t, out, "for the offline CPUs and --map (default: the config's sysfsRoot, /)")
	assert.NotContains(t, out, "with --map:")
}
