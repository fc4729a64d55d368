package dra

import (
	"os"
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
