package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
