package dra

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestSaveFailuresAreLoggedOnceAMinutePerError: the same failure is logged
// once, again after a minute with the number not logged since; another
// failure is logged at once, the first again only a minute after its own
// line; a success says how many failed and starts anew.
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
	assert.False(t, log, "a change back within a minute of its own line")
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

// TestSaveFailuresTakingTurnsAreLoggedOnceAMinuteEach: a write failing
// one way, then another, then the first again (ENOSPC and EIO from a
// flaky disk, or two steps taking turns) is two failures, each logged at
// once and again at most once a minute with the number of its own not
// logged since. Told apart by the last error only, every change logged,
// so every kubelet retry wrote a line.
func TestSaveFailuresTakingTurnsAreLoggedOnceAMinuteEach(t *testing.T) {
	var f saveFailures
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	path := "/var/lib/nri-cpupool/dra-claims.json"
	full := &os.PathError{Op: "writing the temporary file for", Path: path, Err: syscall.ENOSPC}
	eio := &os.PathError{Op: "writing the temporary file for", Path: path, Err: syscall.EIO}
	logged := 0
	for i := range 20 {
		err := error(full)
		if i%2 == 1 {
			err = eio
		}
		if log, _ := f.fail(err, at.Add(time.Duration(i)*time.Second)); log {
			logged++
		}
	}
	assert.Equal(t, 2, logged, "20 retries within a minute taking turns between two failures")
	log, n := f.fail(full, at.Add(time.Minute))
	assert.True(t, log, "the first again after a minute")
	assert.Equal(t, 9, n, "its own not logged since")
	log, _ = f.fail(eio, at.Add(time.Minute))
	assert.False(t, log, "the second was logged at 1s, less than a minute ago")
	log, n = f.fail(eio, at.Add(time.Minute+time.Second))
	assert.True(t, log, "the second again a minute after it was logged")
	assert.Equal(t, 10, n)
	assert.Equal(t, 23, f.succeed())
	log, _ = f.fail(eio, at.Add(time.Minute+2*time.Second))
	assert.True(t, log, "a failure after a success is new")
}

// TestSaveFailuresAreToldApartByTheStepThePathAndTheErrno: an
// *os.PathError is the same failure when its step, file and errno are,
// whatever the context wrapped around it says; another step or another
// errno is another failure, logged at once. An error without a PathError
// is told apart by its text.
func TestSaveFailuresAreToldApartByTheStepThePathAndTheErrno(t *testing.T) {
	var f saveFailures
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	path := "/var/lib/nri-cpupool/dra-claims.json"
	write := &os.PathError{Op: "writing the temporary file for", Path: path, Err: syscall.ENOSPC}
	log, _ := f.fail(fmt.Errorf("saving DRA claims of 3 Prepares: %w", write), at)
	assert.True(t, log)
	log, _ = f.fail(fmt.Errorf("saving DRA claims of 5 Prepares: %w", write), at.Add(time.Second))
	assert.False(t, log, "the same step, file and errno in other words")
	rename := &os.PathError{Op: "renaming the temporary file over", Path: path, Err: syscall.ENOSPC}
	log, _ = f.fail(rename, at.Add(2*time.Second))
	assert.True(t, log, "another step")
	log, _ = f.fail(&os.PathError{Op: write.Op, Path: path + ".2", Err: syscall.ENOSPC}, at.Add(3*time.Second))
	assert.True(t, log, "another file")
	log, _ = f.fail(&os.PathError{Op: write.Op, Path: path, Err: syscall.EDQUOT}, at.Add(4*time.Second))
	assert.True(t, log, "another errno")
	log, _ = f.fail(errors.New("read-only"), at.Add(5*time.Second))
	assert.True(t, log, "an error without a PathError, by its text")
	log, _ = f.fail(errors.New("read-only"), at.Add(6*time.Second))
	assert.False(t, log)
	log, _ = f.fail(errors.New("read-only, again"), at.Add(7*time.Second))
	assert.True(t, log)
}

// TestSaveFailuresOfManyKindsStayBounded: failures that read differently
// every time (an error whose text carries something new at each retry)
// are each logged, but what is remembered of them stays bounded.
func TestSaveFailuresOfManyKindsStayBounded(t *testing.T) {
	var f saveFailures
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	for i := range 10 * saveFailureKinds {
		log, _ := f.fail(fmt.Errorf("failure %d", i), at.Add(time.Duration(i)*time.Millisecond))
		require.True(t, log, "failure %d is new", i)
	}
	assert.LessOrEqual(t, len(f.kinds), saveFailureKinds)
	assert.Equal(t, 10*saveFailureKinds, f.succeed())
}

// TestCDIWritesFailingTwoWaysByTurnsAreLoggedOnceEachAndAllCounted: the
// CDI spec of a claim failing in one place, then another, by turns (here
// two unwritable directories), is two failures logged once each within
// the minute, however many retries; the counter still counts every
// failed write and the first write that succeeds says how many failed.
func TestCDIWritesFailingTwoWaysByTurnsAreLoggedOnceEachAndAllCounted(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	var logged bytes.Buffer
	td.log.SetOutput(&logged)
	dirs := []string{unwritableCDIDir(t), unwritableCDIDir(t)}
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 4, 0, 8)}, "pod-1")
	for i := range 6 {
		td.cdiDir = dirs[i%2]
		require.Error(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	}
	assert.Equal(t, 2, strings.Count(logged.String(), "level=warn"),
		"six retries within a minute failing two ways by turns are two lines:\n%s", logged.String())
	require.NoError(t, testutil.CollectAndCompare(td.Collector(), strings.NewReader(`
# HELP cpupool_dra_cdi_write_errors_total `+cdiWriteErrorsHelp+`
# TYPE cpupool_dra_cdi_write_errors_total counter
cpupool_dra_cdi_write_errors_total 6
`), "cpupool_dra_cdi_write_errors_total"))
	td.cdiDir = td.cdi
	logged.Reset()
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	assert.Contains(t, logged.String(), "CDI specs written again after 6 failed")
}
