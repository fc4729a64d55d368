package dra

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestSaveFailuresAreLoggedOnceAMinutePerError: the same failure is logged
// once, again after a minute with the number not logged since; another
// failure is logged at once; a success says how many failed and starts
// anew.
func TestSaveFailuresAreLoggedOnceAMinutePerError(t *testing.T) {
	var f saveFailures
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	ro, full := errors.New("read-only"), errors.New("no space")
	step := func(err error, after time.Duration) (bool, int) { return f.fail(err, at.Add(after)) }
	log, n := step(ro, 0)
	assert.True(t, log)
	assert.Zero(t, n)
	for i := range 3 {
		log, _ = step(ro, time.Duration(i+1)*time.Second)
		assert.False(t, log, "the same failure within a minute")
	}
	log, n = step(ro, time.Minute)
	assert.True(t, log, "again after a minute")
	assert.Equal(t, 3, n)
	log, n = step(full, time.Minute+time.Second)
	assert.True(t, log, "another failure at once")
	assert.Zero(t, n)
	log, _ = step(ro, time.Minute+2*time.Second)
	assert.True(t, log, "a change back is a change too")
	assert.Equal(t, 7, f.succeed())
	assert.Zero(t, f.succeed())
	log, _ = step(ro, time.Minute+3*time.Second)
	assert.True(t, log, "a new failure after a success")
}

// TestSaveFailureOfTheRealWriterIsLoggedOnceAMinute: docs/dra.md and
// docs/metrics.md promise the same failure once a minute however many
// Prepares the kubelet retries. The real writer (atomicfile.Replace) once
// named its random temporary file (dra-claims.json.tmp-<random>) in the
// error of every step after creating it, so a write, close or rename that
// fails (ENOSPC, EDQUOT, EIO; here a rename onto a directory) read
// differently at each retry and every retry was logged.
func TestSaveFailureOfTheRealWriterIsLoggedOnceAMinute(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	path := filepath.Join(t.TempDir(), "dra-claims.json")
	var logged bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logged)
	d, err := New(s, Options{NodeName: testNode, ClaimsFile: path, CDIDir: t.TempDir(), Log: log})
	require.NoError(t, err)
	// The claims file's place is now taken by a non-empty directory: the
	// temporary file is written, its rename over the path fails.
	require.NoError(t, os.MkdirAll(filepath.Join(path, "x"), 0o700))
	claim := allocatedClaim("uid-1", "app-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 10, 4)}, "pod-1")
	logged.Reset()
	for range 6 {
		require.Error(t, prepare(t, d, claim)["uid-1"].Err)
	}
	assert.Equal(t, 1, strings.Count(logged.String(), "level=warn"),
		"six Prepares failing the same way within a minute must be one log line:\n%s", logged.String())
	assert.NotContains(t, logged.String(), ".tmp-", "the log names the claims file, not a temporary file gone by the time it is read")
	assert.Contains(t, logged.String(), path)
}
