package cli

import (
	"flag"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
)

// TestKeyFlagEmptyIsNoOverride: an empty value of a key flag means no
// override, as `run --log-level ""` did before the flag checked its value
// (review 58: it exited 2, "unknown level"); a value is still checked.
func TestKeyFlagEmptyIsNoOverride(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	level := keyFlagVar(fs, "log-level", "logLevel", "", func(c *config.Config, v string) { c.LogLevel = v })
	require.NoError(t, fs.Parse([]string{"--log-level", ""}))
	assert.Equal(t, "", *level)
	require.NoError(t, fs.Parse([]string{"--log-level", "DEBUG"}))
	assert.Equal(t, "DEBUG", *level)
	assert.ErrorContains(t, fs.Parse([]string{"--log-level", "loud"}), `unknown level "loud"`)

	// Through run: past the flags (exit 2 is a bad flag), to the missing config.
	code, _, errOut := run(t, "run", "--log-level", "", "--config", filepath.Join(t.TempDir(), "none.yaml"))
	assert.Equal(t, 1, code, errOut)
	assert.NotContains(t, errOut, "log-level", errOut)
}
