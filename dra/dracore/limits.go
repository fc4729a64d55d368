package dracore

import (
	"fmt"
	"maps"
	"slices"
)

// MaxResultsPerClaim is the API's limit on a claim's allocation results
// (k8s.io/api resource/v1 AllocationResultsMaxSize; package dra's tests
// check that the two agree, this package links no Kubernetes library).
// The scheduler's allocator refuses a claim that asks for more devices
// ("exceeds the claim limit of 32"), and the API server a status that
// holds more.
const MaxResultsPerClaim = 32

// ClaimLimit says what MaxResultsPerClaim means for a node that offers
// groups in model, or "" when it takes nothing from it. In ModelCPU a CPU
// is one device and one result: a claim, and a container's
// cpupool.dev/exclusive (the extended-resource alias, whose claim the
// scheduler makes), gets at most MaxResultsPerClaim CPUs however many the
// node offers, and a larger one stays Pending. In ModelNUMANode a request
// is one result whatever its CPU count.
func ClaimLimit(model string, groups []Group) string {
	if model != ModelCPU {
		return ""
	}
	byPool := map[string]int{}
	for _, g := range groups {
		byPool[g.Pool] += g.Slots
	}
	largest, pool := 0, ""
	for _, p := range slices.Sorted(maps.Keys(byPool)) {
		if byPool[p] > largest {
			largest, pool = byPool[p], p
		}
	}
	if largest <= MaxResultsPerClaim {
		return ""
	}
	return fmt.Sprintf("in the %s model a claim gets at most %d CPUs (the API's %d allocation results per claim, one per CPU here), "+
		"and a container's %s/exclusive at most %d, of the %d %s CPUs this node offers: a larger claim stays Pending "+
		"(the scheduler: \"exceeds the claim limit of %d\"); for containers of more than %d CPUs use dra.devices: %s, "+
		"where a request is one result whatever its CPU count",
		ModelCPU, MaxResultsPerClaim, MaxResultsPerClaim, DriverName, MaxResultsPerClaim, largest, pool,
		MaxResultsPerClaim, MaxResultsPerClaim, ModelNUMANode)
}
