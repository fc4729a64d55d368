package dra

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/cpupool/nri-cpupool/pools"
)

// A Prepare whose CDI spec cannot be written (a full /run, an SELinux
// denial on /var/run/cdi) fails: the kubelet gets the error and retries.
// The daemon said nothing of it but "prepared: CPUs ...", which ran once
// the claims file was written, before the spec was.

// unwritableCDIDir is a CDI directory that cannot be created: below a
// regular file (mkdir fails with ENOTDIR).
func unwritableCDIDir(t *testing.T) string {
	t.Helper()
	notDir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	return filepath.Join(notDir, "cdi")
}

// TestOpaqueConfigWarningIsNotLoggedForAPrepareWhoseCDIWriteFails: the
// "prepared again as before" warning of a remembered claim with opaque
// config ran before the CDI spec was written, so every failing retry
// logged the claim as prepared again.
func TestOpaqueConfigWarningIsNotLoggedForAPrepareWhoseCDIWriteFails(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 4, 0, 8)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	withConfig := claim.DeepCopy()
	withConfig.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaqueConfig(resourceapi.AllocationConfigSourceClass, DriverName, `{"fullPCPUsOnly": true}`)}

	d := td.restart(t)
	var logged bytes.Buffer
	d.log.SetOutput(&logged)
	d.cdiDir = unwritableCDIDir(t)
	for range 3 {
		require.Error(t, prepare(t, d, withConfig)["uid-1"].Err, "the CDI spec cannot be written: the Prepare fails")
	}
	assert.NotContains(t, logged.String(), "prepared again",
		"three failed Prepares must not be logged as prepared:\n%s", logged.String())

	d.cdiDir = td.cdi
	logged.Reset()
	require.NoError(t, prepare(t, d, withConfig)["uid-1"].Err)
	assert.Equal(t, 1, strings.Count(logged.String(), "prepared again"), "said once, by the Prepare that worked:\n%s", logged.String())
}

// TestFailedCDIWriteOfAPrepareIsLoggedNotAsPrepared: the kubelet got the
// error, the daemon's log only "prepared: CPUs ...".
func TestFailedCDIWriteOfAPrepareIsLoggedNotAsPrepared(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	var logged bytes.Buffer
	td.log.SetOutput(&logged)
	td.cdiDir = unwritableCDIDir(t)
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 4, 0, 8)}, "pod-1")
	err := prepare(t, td.Driver, claim)["uid-1"].Err
	require.Error(t, err)
	assert.Contains(t, logged.String(), "not a directory", "the failed Prepare's reason is logged:\n%s", logged.String())
	assert.NotContains(t, logged.String(), "prepared: CPUs", "a failed Prepare is not logged as prepared:\n%s", logged.String())
}

// TestFailedCDIWritesAreLoggedOnceAMinuteAndCounted: the kubelet retries
// every claim of the node's pods; while the CDI directory stays
// unwritable each retry fails the same way. One line says so (the claim
// UID in the spec's name does not make each claim's failure another),
// cpupool_dra_cdi_write_errors_total counts every failure (the alert
// CpupoolDRAClaimsWriteFailing fires on it), and the first spec written
// again says how many failed.
func TestFailedCDIWritesAreLoggedOnceAMinuteAndCounted(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	var logged bytes.Buffer
	td.log.SetOutput(&logged)
	td.cdiDir = unwritableCDIDir(t)
	a := allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 2, 0, 8)}, "pod-a")
	b := allocatedClaim("uid-b", "b", slots{"cpus": slotsOn(pools.Exclusive, 2, 10, 8)}, "pod-b")
	for range 3 {
		res := prepare(t, td.Driver, a, b)
		require.Error(t, res["uid-a"].Err)
		require.Error(t, res["uid-b"].Err)
	}
	assert.Equal(t, 1, strings.Count(logged.String(), "level=warn"),
		"six Prepares failing the same way within a minute are one line:\n%s", logged.String())
	assert.Contains(t, logged.String(), "writing the CDI spec of claim uid-a")
	require.NoError(t, testutil.CollectAndCompare(td.Collector(), strings.NewReader(`
# HELP cpupool_dra_cdi_write_errors_total `+cdiWriteErrorsHelp+`
# TYPE cpupool_dra_cdi_write_errors_total counter
cpupool_dra_cdi_write_errors_total 6
# HELP cpupool_dra_claims_write_errors_total `+writeErrorsHelp+`
# TYPE cpupool_dra_claims_write_errors_total counter
cpupool_dra_claims_write_errors_total 0
`), "cpupool_dra_cdi_write_errors_total", "cpupool_dra_claims_write_errors_total"))

	td.cdiDir = td.cdi
	logged.Reset()
	res := prepare(t, td.Driver, a, b)
	require.NoError(t, res["uid-a"].Err)
	require.NoError(t, res["uid-b"].Err)
	assert.Contains(t, logged.String(), "CDI specs written again after 6 failed")
}

// TestAPrepareRetriedAfterAFailedCDIWriteKeepsItsCPUs: the claims file
// was written before the CDI spec failed, so the claim is remembered with
// its CPUs and tokens. The kubelet's retry gets the same CPUs and a spec
// with the remembered token, and the claim is said prepared once, then;
// an Unprepare instead (the pod deleted meanwhile) releases it.
func TestAPrepareRetriedAfterAFailedCDIWriteKeepsItsCPUs(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	var logged bytes.Buffer
	td.log.SetOutput(&logged)
	td.cdiDir = unwritableCDIDir(t)
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 4, 0, 8)}, "pod-1")
	for range 2 {
		require.Error(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	}
	failed := td.Claims()["uid-1"]
	require.NotNil(t, failed, "the claims file holds it: the retry keeps its CPUs")
	assert.NotContains(t, logged.String(), "prepared: CPUs", "not prepared yet:\n%s", logged.String())

	td.cdiDir = td.cdi
	logged.Reset()
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	now := td.Claims()["uid-1"]
	assert.Equal(t, failed.Requests["cpus"].CPUs, now.Requests["cpus"].CPUs, "the retry keeps the CPUs of the failed Prepare")
	assert.Equal(t, []string{EnvName("uid-1", "cpus") + "=" + now.Requests["cpus"].Token},
		cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")], "the spec holds the remembered token")
	assert.Equal(t, 1, strings.Count(logged.String(), `prepared: CPUs \"`+now.Requests["cpus"].CPUs+`\"`),
		"said prepared once, by the Prepare that wrote the spec:\n%s", logged.String())

	logged.Reset()
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	assert.NotContains(t, logged.String(), "prepared: CPUs", "said once, not again by the next Prepare")

	// Failed again, then unprepared: nothing of it is left.
	td.cdiDir = unwritableCDIDir(t)
	other := allocatedClaim("uid-2", "other", slots{"cpus": slotsOn(pools.Exclusive, 2, 10, 8)}, "pod-2")
	require.Error(t, prepare(t, td.Driver, other)["uid-2"].Err)
	require.NotNil(t, td.Claims()["uid-2"])
	td.cdiDir = td.cdi
	res, err := td.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "uid-2", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "other"}}})
	require.NoError(t, err)
	require.NoError(t, res["uid-2"])
	assert.Nil(t, td.Claims()["uid-2"], "unprepared: released")
	assert.Len(t, td.Claims(), 1)
	logged.Reset()
	require.NoError(t, prepare(t, td.Driver, other)["uid-2"].Err)
	assert.Equal(t, 1, strings.Count(logged.String(), "prepared: CPUs"),
		"the unprepared claim's failed Prepare is not said again:\n%s", logged.String())
}

// A claim whose first Prepare failed to write its CDI spec is remembered
// (the claims file holds it). The daemon restarts (an upgrade, a crash)
// before the kubelet's retry succeeds: what that first Prepare placed was
// kept in memory only (unreported), so the retry that finally writes the
// spec logs nothing. The operator read "preparing claim ... not prepared:
// the kubelet retries" and never a line saying it was prepared, nor
// "CDI specs written again".
func TestAClaimPreparedAfterARestartThatFollowedAFailedCDIWriteIsSaidPrepared(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	cdi := td.cdi
	td.cdiDir = unwritableCDIDir(t)
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 4, 0, 8)}, "pod-1")
	require.Error(t, prepare(t, td.Driver, claim)["uid-1"].Err)

	d := td.restart(t)
	var logged bytes.Buffer
	d.log.SetOutput(&logged)
	d.cdiDir = cdi
	require.NoError(t, prepare(t, d, claim)["uid-1"].Err)
	_, err := os.Stat(cdiFile(cdi, "uid-1"))
	require.NoError(t, err, "the spec is written now")
	assert.Contains(t, logged.String(), "prepared",
		"the Prepare that first wrote the spec of a claim whose earlier Prepare failed says it is prepared:\n%s", logged.String())
}

// Two claims of one kubelet call, one whose spec cannot be written and one
// whose can: each retry logs the failure again, because the other claim's
// success in the same call resets the coalescing ("written again after 1
// failed"), and the kubelet retries every few seconds.
func TestACDIWriteFailingForOneClaimOnlyIsNotLoggedAtEveryRetry(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	var logged bytes.Buffer
	td.log.SetOutput(&logged)
	a := allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 2, 0, 8)}, "pod-a")
	b := allocatedClaim("uid-b", "b", slots{"cpus": slotsOn(pools.Exclusive, 2, 10, 8)}, "pod-b")
	// uid-a's spec path is taken by a directory: its rename fails, uid-b's works.
	require.NoError(t, os.MkdirAll(filepath.Join(cdiFile(td.cdi, "uid-a"), "x"), 0o755))
	for range 5 {
		res := prepare(t, td.Driver, a, b)
		require.Error(t, res["uid-a"].Err)
		require.NoError(t, res["uid-b"].Err)
	}
	assert.LessOrEqual(t, strings.Count(logged.String(), "level=warn"), 1,
		"five retries failing the same way within a minute are one line:\n%s", logged.String())
}
