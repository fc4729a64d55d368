package dra

import (
	"fmt"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// The API's limit of 32 allocation results per claim, met in the cpu model
// where a CPU is one result (issue 33): the scheduler's own allocator
// refuses a larger claim, and the extended-resource alias's, with its
// reason, before any device is tried; the numaNode model gives the same
// CPUs in one result; and the driver says so when it starts.
func TestClaimLimitOfTheCPUModel(t *testing.T) {
	require.Equal(t, resourceapi.AllocationResultsMaxSize, MaxResultsPerClaim, "dracore's copy of the API's limit")
	s := static(t, "epyc-2s-384", epycConfig)
	cls := shippedClasses(t)
	empty := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	cpuSlices := ourSlices(t, s, ModelCPU, nil)

	at := schedule(t, cls, cpuSlices, claimFor("uid-32", nil, request("cpus", "cpupool-exclusive", MaxResultsPerClaim)))
	require.Len(t, at, 1, "a claim of 32 CPUs is allocated in the cpu model")
	d := newTestDriver(t, s)
	require.NoError(t, prepare(t, d.Driver, withAllocation(claimFor("uid-32", nil), at[0], "pod-32"))["uid-32"].Err)
	assert.Equal(t, MaxResultsPerClaim, cpusOf(t, d.Driver, "uid-32", "cpus").Size())

	for _, claim := range []*resourceapi.ResourceClaim{
		claimFor("uid-33", nil, request("cpus", "cpupool-exclusive", MaxResultsPerClaim+1)),
		// What the scheduler makes for cpupool.dev/exclusive: 33.
		claimFor("uid-alias", nil, request("container-0-request-0", "cpupool-exclusive-cpus", MaxResultsPerClaim+1)),
	} {
		_, err := allocate(t, cls, cpuSlices, empty, claim)
		require.Error(t, err, claim.Name)
		assert.Contains(t, err.Error(), fmt.Sprintf("exceeds the claim limit of %d", MaxResultsPerClaim), claim.Name)
	}

	big := claimFor("uid-big", nil, capacity(request("cpus", "cpupool-exclusive", 1), MaxResultsPerClaim+1))
	res := schedule(t, cls, ourSlices(t, s, ModelNUMANode, nil), big)
	require.Len(t, res, 1, "33 CPUs in one request of the numaNode model")
	assert.Len(t, res[0].Devices.Results, 1)
	nd := newTestDriver(t, s)
	require.NoError(t, prepare(t, nd.Driver, withAllocation(big, res[0], "pod-big"))["uid-big"].Err)
	assert.Equal(t, MaxResultsPerClaim+1, cpusOf(t, nd.Driver, "uid-big", "cpus").Size())

	// At start, in the cpu model only, and only where a pool has more
	// CPUs than a claim can get.
	for _, tc := range []struct {
		fixture, config, model string
		warns                  bool
	}{
		{"epyc-2s-384", epycConfig, ModelCPU, true},
		{"epyc-2s-384", epycConfig, ModelNUMANode, false},
		{"epyc-2s-384", `isolatedCPUs: "4-35"`, ModelCPU, false},
	} {
		log, hook := logtest.NewNullLogger()
		_, err := New(static(t, tc.fixture, tc.config), Options{NodeName: testNode, Model: tc.model, ClaimsFile: t.TempDir() + "/claims.json", CDIDir: t.TempDir(), Log: log})
		require.NoError(t, err)
		var warned string
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel {
				warned += e.Message
			}
		}
		name := tc.model + " " + tc.config
		if !tc.warns {
			assert.Empty(t, warned, name)
			continue
		}
		for _, want := range []string{"dra.devices: in the cpu model a claim gets at most 32 CPUs", "cpupool.dev/exclusive at most 32",
			"exceeds the claim limit of 32", "use dra.devices: numaNode"} {
			assert.Contains(t, warned, want, name)
		}
	}
}

// A claim allocated with more results than the API allows cannot have been
// counted by a scheduler: Prepare refuses it, naming the limit and the
// model to use, and gives none of its CPUs.
func TestPrepareRefusesMoreResultsThanTheAPIAllows(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	d := newTestDriver(t, s)
	var names []string
	for i := range MaxResultsPerClaim + 1 {
		names = append(names, SlotName("exclusive", 0, i))
	}
	err := prepare(t, d.Driver, allocatedClaim("uid-1", "too-many", slots{"cpus": names}, "pod-1"))["uid-1"].Err
	require.Error(t, err)
	assert.Contains(t, err.Error(), "33 results, more than the API's 32 per claim (AllocationResultsMaxSize)")
	assert.Contains(t, err.Error(), "needs dra.devices: numaNode")
	assert.Empty(t, d.Claims(), "nothing prepared")
	err = prepare(t, d.Driver, allocatedClaim("uid-2", "at-limit", slots{"cpus": names[:MaxResultsPerClaim]}, "pod-2"))["uid-2"].Err
	require.NoError(t, err, "32 results are prepared")
}
