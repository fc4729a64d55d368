package dra

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cpupool/nri-cpupool/pools"
)

// opaqueConfig is opaque config for driver in a claim's allocation, for
// the named requests (none: every request).
func opaqueConfig(source resourceapi.AllocationConfigSource, driver, params string, requests ...string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{Source: source, Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}
}

// A claim may carry opaque config for driver cpupool.dev (the API passes
// it in status.allocation.devices.config). The driver defines no
// parameters; before, it never read them, so a user's
// `{"fullPCPUsOnly": true}` or a typo was prepared silently and the
// container got CPUs that ignore it. Now the claim is refused, naming the
// request and echoing the parameters, and nothing is prepared.
func TestOpaqueConfigForTheDriverIsRefused(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	claim := allocatedClaim("uid-1", "app-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 10, 4)}, "pod-1")
	claim.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaqueConfig(resourceapi.AllocationConfigSourceClaim, DriverName, `{"fullPCPUsOnly": true, "pool": "shared"}`, "cpus")}
	res := prepare(t, d.Driver, claim)["uid-1"]
	require.Error(t, res.Err, "opaque parameters this driver does not understand must be refused, not ignored")
	msg := res.Err.Error()
	assert.Contains(t, msg, `request "cpus": the claim's opaque config for driver cpupool.dev ("{\"fullPCPUsOnly\": true, \"pool\": \"shared\"}") is refused: cpupool.dev defines no parameters`)
	assert.Contains(t, msg, "hideHyperthreads, fullPCPUsOnly and pool do not apply to claims")
	assert.Contains(t, msg, "cpupool-exclusive-non-isolcpus")
	assert.Contains(t, msg, "docs/dra.md")
	assert.Empty(t, d.Claims(), "nothing is prepared")
}

// Config from the DeviceClass is refused too, and a config that names no
// request applies to every request of the claim; long parameters are
// echoed in part.
func TestOpaqueConfigOfTheClassForEveryRequestIsRefused(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	claim := allocatedClaim("uid-1", "app-cpus", slots{"a": slotsOn(pools.Exclusive, 3, 10, 2), "b": slotsOn(pools.Exclusive, 3, 12, 2)}, "pod-1")
	params := `{"hideHyperthreads": true, "pad": "` + strings.Repeat("x", 10000) + `"}`
	claim.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaqueConfig(resourceapi.AllocationConfigSourceClass, DriverName, params)}
	res := prepare(t, d.Driver, claim)["uid-1"]
	require.Error(t, res.Err)
	msg := res.Err.Error()
	assert.Contains(t, msg, `requests "a", "b": its DeviceClass's opaque config for driver cpupool.dev ("{\"hideHyperthreads\": true`)
	assert.Contains(t, msg, fmt.Sprintf("… (%d bytes)", len(params)))
	assert.Less(t, len(msg), 1000, "the parameters are echoed in part")
}

// Opaque config for another driver (the NIC's, in the same claim) is
// that driver's: the claim is prepared.
func TestOpaqueConfigForAnotherDriverIsLeftToIt(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	claim := allocatedClaim("uid-1", "app-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 10, 4)}, "pod-1")
	claim.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaqueConfig(resourceapi.AllocationConfigSourceClaim, "dra.net", `{"mtu": 9000}`, "nic"),
		opaqueConfig(resourceapi.AllocationConfigSourceClass, "dra.net", `{"mode": "sriov"}`)}
	res := prepare(t, d.Driver, claim)["uid-1"]
	require.NoError(t, res.Err)
	assert.Len(t, d.Claims(), 1)
}
