package dra

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestCorruptClaimsFileRemovesTheCDISpecAndSaysTheClaimIsLost: a corrupt
// claims file left the claim's CDI spec in the CDI directory (the kubelet,
// which holds the claim prepared, does not prepare it again), and a
// restarting container of the pod was refused with "it cannot be set by
// hand", blaming the user. Now the spec of a claim the driver does not
// know is removed at start, a spec of a claim it knows stays, and a token
// of a lost claim gets an error that says the claims file was lost and
// how to recover.
func TestCorruptClaimsFileRemovesTheCDISpecAndSaysTheClaimIsLost(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	claim := allocatedClaim("uid-1", "app-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 10, 4)}, "pod-1")
	require.NoError(t, prepare(t, d.Driver, claim)["uid-1"].Err)
	env := cdiEnv(t, d.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]
	require.Len(t, env, 1)
	foreign := filepath.Join(d.cdi, "vendor.example-gpu_uid-1.json")
	require.NoError(t, os.WriteFile(foreign, []byte("{}"), 0o600))

	require.NoError(t, os.WriteFile(d.claims, []byte("{corrupt"), 0o600))
	d2 := d.restart(t)
	aside, _ := filepath.Glob(d.claims + ".corrupt-*")
	require.Len(t, aside, 1)

	_, _, err := d2.Lookup(env, Container{PodUID: "pod-1", Namespace: "ns", Pod: "pod-pod-1", Name: "c"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "cannot be set by hand", "the token is the driver's own, from a record it lost")
	assert.Contains(t, err.Error(), "CPUPOOL_CLAIM_uid_1_cpus")
	assert.Contains(t, err.Error(), "claims file "+d.claims+" could not be used at its start")
	assert.Contains(t, err.Error(), "delete the pod")
	assert.NoFileExists(t, cdiFile(d.cdi, "uid-1"), "a CDI spec of a claim the driver does not know is stale")
	assert.FileExists(t, foreign, "another vendor's spec is not the driver's")

	// A claim prepared since keeps its spec across the next restart.
	other := allocatedClaim("uid-2", "other-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 10, 4)}, "pod-2")
	require.NoError(t, prepare(t, d2, other)["uid-2"].Err)
	d.restart(t)
	assert.FileExists(t, cdiFile(d.cdi, "uid-2"))
}

// TestUnknownTokenIsSetByHandWhenNoClaimsWereLost: without a lost claims
// file, an unknown token is one set by hand, and the refusal says so,
// echoing the variable's name bounded.
func TestUnknownTokenIsSetByHandWhenNoClaimsWereLost(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	long := EnvPrefix + string(make([]byte, 500))
	_, _, err := d.Lookup([]string{long + "=0123456789abcdef"}, Container{PodUID: "pod-1", Name: "c"})
	require.ErrorContains(t, err, "cannot be set by hand")
	assert.Less(t, len(err.Error()), 400, "the variable's name is echoed bounded")
}

// TestLostClaimsAreStillExplainedAfterTheNextRestart: the record of a
// claims file found unusable lived only in the memory of the process that
// moved it aside. The next restart (an upgrade, a config change, a kill -9
// right after the move) found no claims file, so the tokens of the claims
// the kubelet still holds prepared were again refused as "set by hand", at
// every Synchronize that rebinds their running containers. The record is
// now read back from the file set aside, the newest one.
func TestLostClaimsAreStillExplainedAfterTheNextRestart(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	claim := allocatedClaim("uid-1", "app-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 10, 4)}, "pod-1")
	require.NoError(t, prepare(t, d.Driver, claim)["uid-1"].Err)
	env := cdiEnv(t, d.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]
	require.NoError(t, os.WriteFile(d.claims, []byte("{corrupt"), 0o600))
	d2 := d.restart(t) // finds the file corrupt: moves it aside, knows the claims are lost
	require.NotNil(t, d2.lost)
	d3 := d.restart(t) // a plain restart (or a kill -9 before any save)
	_, _, err := d3.Lookup(env, Container{PodUID: "pod-1", Namespace: "ns", Pod: "pod-pod-1", Name: "c"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "cannot be set by hand", "the token is the driver's own, from a record it lost")
	assert.Contains(t, err.Error(), "kept as "+d2.lost.aside)
	assert.Contains(t, err.Error(), d2.lost.at.UTC().Format(time.RFC3339))

	// A claims file written since does not make the loss forgotten: the
	// kubelet still holds the lost claims. The newest file aside is named.
	other := allocatedClaim("uid-2", "other-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 10, 4)}, "pod-2")
	require.NoError(t, prepare(t, d3, other)["uid-2"].Err)
	older := d.claims + ".unreadable-20200101T000000.000000000Z"
	require.NoError(t, os.WriteFile(older, nil, 0o600))
	d4 := d.restart(t)
	require.NotNil(t, d4.lost)
	assert.Equal(t, d2.lost.aside, d4.lost.aside, "the newest one")
	assert.Len(t, d4.Claims(), 1)
}

// TestUnknownTokenSaysWhereAnUnmovedClaimsFileIs: a claims file that could
// not be moved aside was said "kept as <aside>", a file that did not
// exist; the refusal now says it is still where it was, until the write
// that moves it.
func TestUnknownTokenSaysWhereAnUnmovedClaimsFileIs(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	path := filepath.Join(t.TempDir(), "dra-claims.json")
	require.NoError(t, os.WriteFile(path, []byte("{corrupt"), 0o600))
	d, err := New(s, Options{NodeName: testNode, ClaimsFile: path, CDIDir: t.TempDir(), Log: quietLog()})
	require.NoError(t, err)
	// New moved it aside (the directory is writable); load it again as a
	// read-only state directory leaves it.
	require.NoError(t, os.Rename(d.lost.aside, path))
	fail := true
	d.store.rename = func(from, to string) error {
		if fail {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EROFS}
		}
		return os.Rename(from, to)
	}
	_, _, discarded := d.store.load(time.Now())
	require.NotNil(t, discarded)
	d.lost = &lostClaims{at: discarded.At, file: discarded.Path, aside: discarded.Aside}
	env := []string{EnvName("uid-1", "cpus") + "=0123456789abcdef"}

	_, _, err = d.Lookup(env, Container{PodUID: "pod-1", Name: "c"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "kept as", "it was not moved")
	assert.Contains(t, err.Error(), "still at "+path)
	assert.Contains(t, err.Error(), "moved to "+discarded.Aside)

	fail = false
	require.NoError(t, d.store.save(1, encodeClaims(nil)))
	_, _, err = d.Lookup(env, Container{PodUID: "pod-1", Name: "c"})
	assert.ErrorContains(t, err, "kept as "+discarded.Aside, "moved by the write")
}

// TestUnremovableStaleCDISpecsAreOneWarning: removeStaleCDISpecs logged a
// warning per spec it could not remove, unbounded (a lost claims file of
// a busy node, on a CDI directory gone read-only). Now one warning names
// the first few and counts them all.
func TestUnremovableStaleCDISpecsAreOneWarning(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	cdi := t.TempDir()
	const n = 3 * maxListed
	for i := range n {
		// A non-empty directory: os.Remove fails, even for root.
		spec := cdiFile(cdi, fmt.Sprintf("uid-%02d", i))
		require.NoError(t, os.MkdirAll(filepath.Join(spec, "x"), 0o700))
	}
	var logged bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logged)
	_, err := New(s, Options{NodeName: testNode, ClaimsFile: filepath.Join(t.TempDir(), "dra-claims.json"), CDIDir: cdi, Log: log})
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(logged.String(), "level=warn"), logged.String())
	assert.Contains(t, logged.String(), fmt.Sprintf("could not remove the CDI specs of %d claims", n))
	assert.Contains(t, logged.String(), "uid-00")
	assert.NotContains(t, logged.String(), fmt.Sprintf("uid-%02d", n-1), "bounded")
	assert.Contains(t, logged.String(), "directory not empty", "the first error is said")
}
