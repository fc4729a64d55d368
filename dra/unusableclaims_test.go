package dra

import (
	"bytes"
	"errors"
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

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
	"github.com/cpupool/nri-cpupool/pools"
)

// A claims file the driver cannot use never stops the daemon;
// see lostclaims_test.go for what becomes of the claims it held.

// TestUnreadableClaimsFileDoesNotStopTheDaemon: a dra-claims.json that
// cannot be read (a directory here, as EIO or EACCES would) made New fail,
// and with it the daemon: no container on the node was pinned. Now the
// driver starts with no claims, the file is kept aside, and it is counted.
func TestUnreadableClaimsFileDoesNotStopTheDaemon(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	claims := filepath.Join(t.TempDir(), "dra-claims.json")
	require.NoError(t, os.MkdirAll(claims, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(claims, "inside"), []byte("x"), 0o600))
	discarded := 0
	d, err := New(s, Options{NodeName: testNode, ClaimsFile: claims, CDIDir: t.TempDir(), Log: quietLog(), Discarded: func() { discarded++ }})
	require.NoError(t, err, "an unusable claims file must not stop the daemon (and with it all pinning)")
	assert.Empty(t, d.Claims())
	assert.Equal(t, 1, discarded, "counted")
	aside, _ := filepath.Glob(claims + ".unreadable-*")
	require.Len(t, aside, 1, "kept aside, not overwritten")
	inside, err := os.ReadFile(filepath.Join(aside[0], "inside"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(inside))
}

// TestUnmovedClaimsFileIsNotReplacedUntilMovedAside: a corrupt claims
// file that cannot be moved aside (a read-only state directory) made New
// fail too. Now the driver starts with no claims and no write replaces
// the file before it has been moved aside.
func TestUnmovedClaimsFileIsNotReplacedUntilMovedAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dra-claims.json")
	require.NoError(t, os.WriteFile(path, []byte("{corrupt"), 0o600))
	st := newStore(path)
	fail := true
	st.rename = func(from, to string) error {
		if fail {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EROFS}
		}
		return os.Rename(from, to)
	}
	claims, _, discarded := st.load(time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC))
	assert.Empty(t, claims)
	require.NotNil(t, discarded)
	assert.Contains(t, discarded.String(), "could not be moved aside")

	err := st.save(1, []byte(`{"version":1,"claims":{}}`))
	require.Error(t, err, "not replaced before it is moved aside")
	assert.Contains(t, err.Error(), "must first be moved to "+path+".corrupt-20261207T010203")
	kept, _ := os.ReadFile(path)
	assert.Equal(t, "{corrupt", string(kept))

	fail = false
	require.NoError(t, st.save(1, []byte(`{"version":1,"claims":{}}`)))
	aside, _ := os.ReadFile(path + ".corrupt-20261207T010203.000000000Z")
	assert.Equal(t, "{corrupt", string(aside), "moved aside as it was")
	back, _, discarded := newStore(path).load(time.Now())
	assert.Nil(t, discarded)
	assert.Empty(t, back)
}

// TestPrepareFailingOnAnUnmovedClaimsFileIsLoggedAndCounted: with the
// claims file unmovable (a read-only state directory), every Prepare
// fails; the kubelet got the error, but the daemon's log said "prepared"
// (logged before the write) and nothing of the failure, and no metric
// counted it. Now the claim is said prepared only once written, the
// failure is logged, once for a flood of Prepares failing the same way,
// and counted (cpupool_dra_claims_write_errors_total).
func TestPrepareFailingOnAnUnmovedClaimsFileIsLoggedAndCounted(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	dir := t.TempDir()
	path := dir + "/dra-claims.json"
	require.NoError(t, os.WriteFile(path, []byte("{corrupt"), 0o600))
	var logged bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logged)
	d, err := New(s, Options{NodeName: testNode, ClaimsFile: path, CDIDir: t.TempDir(), Log: log})
	require.NoError(t, err)
	// New moved it aside (the directory is writable); put it back as
	// unmoved, as on a read-only state directory.
	require.NoError(t, os.Rename(d.lost.aside, path))
	fail := true
	d.store.rename = func(from, to string) error {
		if fail {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EROFS}
		}
		return os.Rename(from, to)
	}
	d.store.unmoved = &atomicfile.Discarded{Path: path, Kind: atomicfile.KindCorrupt, Problem: errors.New("corrupt"), Aside: d.lost.aside, Unmoved: syscall.EROFS}
	logged.Reset()
	claim := allocatedClaim("uid-1", "app-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 10, 4)}, "pod-1")
	res := prepare(t, d, claim)["uid-1"]
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "is not replaced")
	assert.Contains(t, logged.String(), "is not replaced", "the node's operator reads why every Prepare fails in the daemon's log")
	assert.NotContains(t, logged.String(), "prepared: CPUs", "not prepared: the claims file was not written")
	assert.Equal(t, 1, strings.Count(logged.String(), "level=warn"), logged.String())

	logged.Reset()
	for range 5 {
		require.Error(t, prepare(t, d, claim)["uid-1"].Err)
	}
	assert.Empty(t, logged.String(), "the kubelet's retries do not flood the log")
	require.NoError(t, testutil.CollectAndCompare(d.Collector(), strings.NewReader(`
# HELP cpupool_dra_claims_write_errors_total `+writeErrorsHelp+`
# TYPE cpupool_dra_claims_write_errors_total counter
cpupool_dra_claims_write_errors_total 6
`), "cpupool_dra_claims_write_errors_total"))

	fail = false
	require.NoError(t, prepare(t, d, claim)["uid-1"].Err)
	assert.Contains(t, logged.String(), "written again after 6 failed Prepares", "the end of the failure is said, with how many there were")
	assert.Contains(t, logged.String(), "prepared: CPUs")
}
