package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/dra"
)

// A node with two NUMA nodes of 4 exclusive CPUs, in either model, and
// one NIC on each.
func testSlices(model string) []resourceapi.ResourceSlice {
	numa := func(n int64) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{dra.AttrNUMANode: {IntValue: ptr.To(n)}}
	}
	var cpus []resourceapi.Device
	for n := range int64(2) {
		if model == dra.ModelCPU {
			for i := range 4 {
				cpus = append(cpus, resourceapi.Device{Name: dra.SlotName("exclusive", int(n), i), Attributes: numa(n)})
			}
			continue
		}
		cpus = append(cpus, resourceapi.Device{Name: dra.GroupName("exclusive", int(n)), Attributes: numa(n),
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{dra.CapacityCPUs: {Value: resource.MustParse("4")}}})
	}
	return []resourceapi.ResourceSlice{
		{Spec: resourceapi.ResourceSliceSpec{Driver: dra.DriverName, Pool: resourceapi.ResourcePool{Name: "n1"}, Devices: cpus}},
		{Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", Pool: resourceapi.ResourcePool{Name: "n1"}, Devices: []resourceapi.Device{
			{Name: "nic0-0", Attributes: numa(0)}, {Name: "nic1-0", Attributes: numa(1)}}}},
	}
}

// claim allocates n CPUs of NUMA node cpuNUMA (numaNode model: consumed
// capacity; cpu model: slots from first on) and a NIC.
func claim(name, model string, cpuNUMA, n, first int, nic string) resourceapi.ResourceClaim {
	var results []resourceapi.DeviceRequestAllocationResult
	if model == dra.ModelCPU {
		for i := range n {
			results = append(results, resourceapi.DeviceRequestAllocationResult{Request: "cpus", Driver: dra.DriverName, Pool: "n1",
				Device: dra.SlotName("exclusive", cpuNUMA, first+i)})
		}
	} else {
		results = append(results, resourceapi.DeviceRequestAllocationResult{Request: "cpus", Driver: dra.DriverName, Pool: "n1",
			Device: dra.GroupName("exclusive", cpuNUMA), ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{
				dra.CapacityCPUs: *resource.NewQuantity(int64(n), resource.DecimalSI)}})
	}
	results = append(results, resourceapi.DeviceRequestAllocationResult{Request: "nic", Driver: "nic.example.com", Pool: "n1", Device: nic})
	return resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}}}
}

func TestCheckPassesGoodAllocations(t *testing.T) {
	for _, model := range dra.Models() {
		t.Run(model, func(t *testing.T) {
			claims := []resourceapi.ResourceClaim{
				claim("a", model, 0, 4, 0, "nic0-0"),
				claim("b", model, 1, 2, 0, "nic1-0"),
				{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pending"}},
			}
			v := check(testSlices(model), claims, "cpus", "nic")
			assert.False(t, v.Failed(), "%s", v)
			assert.Equal(t, 2, v.Claims)
			assert.Equal(t, 1, v.Unallocated)
			assert.InDelta(t, 1.0, v.Fullest, 0.001, "NUMA node 0 is full")
		})
	}
}

// Each fault a scheduler could make is found: more CPUs on a NUMA node
// than it offers, a NIC or a slot given twice, CPUs and NIC on different
// NUMA nodes, a device that is in no slice.
func TestCheckFindsEachFault(t *testing.T) {
	cases := []struct {
		name, model    string
		claims         []resourceapi.ResourceClaim
		over, misalign int
	}{
		{"a NUMA node given 5 of its 4 CPUs", dra.ModelNUMANode, []resourceapi.ResourceClaim{
			claim("a", dra.ModelNUMANode, 0, 4, 0, "nic0-0"), claim("b", dra.ModelNUMANode, 0, 1, 0, "nic1-0")}, 2, 1},
		{"a slot given twice", dra.ModelCPU, []resourceapi.ResourceClaim{
			claim("a", dra.ModelCPU, 1, 2, 0, "nic1-0"), claim("b", dra.ModelCPU, 1, 2, 1, "nic0-0")}, 2, 1},
		{"a NIC given twice", dra.ModelNUMANode, []resourceapi.ResourceClaim{
			claim("a", dra.ModelNUMANode, 0, 1, 0, "nic0-0"), claim("b", dra.ModelNUMANode, 0, 1, 0, "nic0-0")}, 1, 0},
		{"CPUs on node 0, NIC on node 1", dra.ModelNUMANode, []resourceapi.ResourceClaim{
			claim("a", dra.ModelNUMANode, 0, 1, 0, "nic1-0")}, 0, 1},
		{"a device in no slice", dra.ModelNUMANode, []resourceapi.ResourceClaim{
			claim("a", dra.ModelNUMANode, 0, 1, 0, "nic7-0")}, 0, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := check(testSlices(tc.model), tc.claims, "cpus", "nic")
			assert.True(t, v.Failed())
			assert.Len(t, v.OverAllocated, tc.over, "%s", v)
			assert.Len(t, v.Misaligned, tc.misalign, "%s", v)
		})
	}
}

// broken, which every scale run feeds to the check once, makes both faults
// from good allocations in either model.
func TestBrokenIsCaught(t *testing.T) {
	for _, model := range dra.Models() {
		t.Run(model, func(t *testing.T) {
			sl := testSlices(model)
			good := []resourceapi.ResourceClaim{claim("a", model, 0, 2, 0, "nic0-0"), claim("b", model, 1, 2, 0, "nic1-0")}
			require.False(t, check(sl, good, "cpus", "nic").Failed())
			bad, err := broken(sl, good, "cpus", "nic")
			require.NoError(t, err)
			v := check(sl, bad, "cpus", "nic")
			assert.NotEmpty(t, v.OverAllocated, "%s", v)
			assert.NotEmpty(t, v.Misaligned, "%s", v)
			assert.False(t, check(sl, good, "cpus", "nic").Failed(), "the good claims are left as they were")
		})
	}
}

func TestMedianPerSecond(t *testing.T) {
	base := time.Now()
	var times []time.Time
	for _, ms := range []int{0, 100, 200, 1100, 2100, 2200, 2300, 2400, 3000} {
		times = append(times, base.Add(time.Duration(ms)*time.Millisecond))
	}
	// Seconds 0, 1 and 2 (the last binding closes the span) saw 3, 1 and
	// 4 bindings: the median is 3.
	assert.Equal(t, 3.0, medianPerSecond(times))
}
