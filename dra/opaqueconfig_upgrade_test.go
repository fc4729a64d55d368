package dra

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/cpupool/nri-cpupool/pools"
)

// A claim prepared by a release that ignored opaque config, whose allocation carried
// opaque config for cpupool.dev (that release never read it), is in the
// claims file and its pod runs. After the upgrade and a reboot (/var/run/cdi
// is tmpfs, empty) the kubelet prepares it again with the SAME allocation
// (status.allocation is immutable, so the config is still there). The
// documented contract (docs/dra.md "Idempotent, and what survives"): a second
// Prepare with the same allocation returns the same devices and writes the
// CDI spec again. Refusing it would leave the CDI spec unwritten, and
// the pod's containers cannot start until the pod is deleted.
func TestOpaqueConfigOfAClaimPreparedBeforeIsPreparedAgain(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 4, 0, 8)}, "pod-1")
	// The old release: config ignored, claim prepared and saved.
	res := prepare(t, td.Driver, claim)["uid-1"]
	require.NoError(t, res.Err)
	env := cdiEnv(t, td.cdi, "uid-1")

	// Same claim object as the API server has it (config was always there).
	withConfig := claim.DeepCopy()
	withConfig.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaqueConfig(resourceapi.AllocationConfigSourceClass, DriverName, `{"fullPCPUsOnly": true}`)}

	require.NoError(t, os.RemoveAll(td.cdi))
	booted := td.restart(t)
	again := prepare(t, booted, withConfig)["uid-1"]
	assert.NoError(t, again.Err, "a claim prepared before the upgrade, same allocation, must be prepared again (warn, don't refuse)")
	assert.Contains(t, booted.Claims(), "uid-1", "the claim is still remembered")
	_, statErr := os.Stat(cdiFile(td.cdi, "uid-1"))
	assert.NoError(t, statErr, "the CDI spec the running pod's containers need is written again")
	if statErr == nil {
		assert.Equal(t, env, cdiEnv(t, td.cdi, "uid-1"))
	}
}

// TestOpaqueConfigWarningIsLoggedOnlyOnceTheClaimIsPrepared: the warning
// that a remembered claim is prepared again despite its opaque config was
// logged while deciding, before the claims file was written: when the
// write failed nothing was prepared (the kubelet got an error) but the log
// said the claim was prepared again, and said it again at every retry. It
// is logged once the file holds the claim, and gives no advice to remove
// the config, which cannot help (the allocation cannot change).
func TestOpaqueConfigWarningIsLoggedOnlyOnceTheClaimIsPrepared(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 4, 0, 8)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	withConfig := claim.DeepCopy()
	withConfig.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaqueConfig(resourceapi.AllocationConfigSourceClass, DriverName, `{"fullPCPUsOnly": true}`)}

	d := td.restart(t)
	var logged bytes.Buffer
	d.log.SetOutput(&logged)
	replace := d.store.replace
	d.store.replace = func(string, []byte, bool) error { return errors.New("no space left on device") }
	d.mu.Lock()
	d.gen++ // the file holds this generation: the re-Prepare must write
	d.mu.Unlock()
	for range 3 {
		require.Error(t, prepare(t, d, withConfig)["uid-1"].Err, "the claims file cannot be written: nothing is prepared")
	}
	assert.NotContains(t, logged.String(), "prepared again",
		"a Prepare that failed must not be logged as prepared:\n%s", logged.String())

	d.store.replace = replace
	require.NoError(t, prepare(t, d, withConfig)["uid-1"].Err)
	assert.Equal(t, 1, strings.Count(logged.String(), "prepared again as before"), "said once, when prepared:\n%s", logged.String())
	assert.Contains(t, logged.String(), "fullPCPUsOnly", "the config is named")
	assert.Contains(t, logged.String(), "take it out of the DeviceClass", "what the operator can do: spare the claims allocated next")
	assert.NotContains(t, logged.String(), "remove the config", "removing it cannot change the allocation")
}

// TestOpaqueConfigWarningSaysPlacedAnewForARequestThatNoLongerFits: a
// remembered request that no longer fits its pool (restart with other
// pools) is placed anew on other CPUs with a new token; the warning then
// said "prepared again as before" beside the line saying "placed anew".
func TestOpaqueConfigWarningSaysPlacedAnewForARequestThatNoLongerFits(t *testing.T) {
	td := newTestDriver(t, static(t, "xeon-2s-interleaved", ""))
	claim := allocatedClaim("uid-1", "moved", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	old := cpusOf(t, td.Driver, "uid-1", "cpus")
	withConfig := claim.DeepCopy()
	withConfig.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaqueConfig(resourceapi.AllocationConfigSourceClass, DriverName, `{"fullPCPUsOnly": true}`)}

	td.pools = static(t, "xeon-2s-interleaved", `pools: {shared: {cpus: "`+old.String()+`"}}`)
	d := td.restart(t)
	var logged bytes.Buffer
	d.log.SetOutput(&logged)
	require.NoError(t, prepare(t, d, withConfig)["uid-1"].Err)
	require.NotEqual(t, old, cpusOf(t, d, "uid-1", "cpus"), "placed anew")
	require.Contains(t, logged.String(), "placed anew")
	assert.NotContains(t, logged.String(), "as before",
		"the claim was placed anew, not prepared as before:\n%s", logged.String())
	assert.Contains(t, logged.String(), `prepared again with request \"cpus\" placed anew`, "the warning says so")
	assert.NotContains(t, logged.String(), "remove the config")
}
