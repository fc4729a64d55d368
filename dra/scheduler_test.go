package dra

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/pools"
)

// These tests run the scheduler's own allocator (the structured package
// kube-scheduler 1.36 uses, with 1.36's default features) over the slices
// this driver publishes and the DeviceClasses it ships, and then prepare
// what it allocated: what a cluster would do, without one.

const nicDriver = "nic.example.com"

// classes are the shipped DeviceClasses plus one for the test NIC driver.
type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, v := range c {
		out = append(out, v)
	}
	return out, nil
}

func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if v, ok := c[name]; ok {
		return v, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

func shippedClasses(t *testing.T) classes {
	t.Helper()
	f, err := os.Open("../deploy/kubernetes/dra/deviceclasses.yaml")
	require.NoError(t, err)
	defer f.Close()
	out := classes{}
	dec := k8syaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var c resourceapi.DeviceClass
		if err := dec.Decode(&c); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		out[c.Name] = &c
	}
	require.Contains(t, out, "cpupool-exclusive")
	require.Contains(t, out, "cpupool-exclusive-non-isolcpus")
	out["nic"] = &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + nicDriver + `"`}}}}}
	return out
}

// published turns driver resources into the ResourceSlice objects the
// controller writes for the node.
func published(driver string, res map[string][]resourceapi.Device) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for pool, devices := range res {
		out = append(out, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: driver + "-" + pool},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(testNode),
				Pool: resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1}, Devices: devices}})
	}
	return out
}

func ourSlices(t *testing.T, p Pools) []*resourceapi.ResourceSlice {
	t.Helper()
	topo, layout := p.Layout()
	res := Resources(testNode, Offer(topo, layout, nil))
	var out []*resourceapi.ResourceSlice
	for name, pool := range res.Pools {
		for i, sl := range pool.Slices {
			out = append(out, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: DriverName + "-" + strconv.Itoa(i)},
				Spec: resourceapi.ResourceSliceSpec{Driver: DriverName, NodeName: ptr.To(testNode),
					Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))}, Devices: sl.Devices}})
		}
	}
	return out
}

// nicOn is a NIC driver's device on a NUMA node, as dranet publishes it.
func nicOn(name string, numa int64) resourceapi.Device {
	return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		AttrNUMANode: {IntValue: ptr.To(numa)}}}
}

// schedule runs the scheduler's allocator for claims on the node, with
// allocated devices already taken; nil means unschedulable.
func schedule(t *testing.T, cls classes, sl []*resourceapi.ResourceSlice, allocated sets.Set[structured.DeviceID], claims ...*resourceapi.ResourceClaim) []resourceapi.AllocationResult {
	t.Helper()
	features := structured.Features{AdminAccess: true, ConsumableCapacity: true, DeviceBindingAndStatus: true, DeviceTaints: true,
		PartitionableDevices: true, PrioritizedList: true}
	if allocated == nil {
		allocated = sets.New[structured.DeviceID]()
	}
	state := structured.AllocatedState{AllocatedDevices: allocated, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	a, err := structured.NewAllocator(context.Background(), features, state, cls, sl, cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}))
	require.NoError(t, err)
	res, err := a.Allocate(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, claims)
	require.NoError(t, err)
	return res
}

// request asks for count devices of a class.
func request(name, class string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
}

func claimFor(uid string, constraints []resourceapi.DeviceConstraint, requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim-" + uid, UID: types.UID(uid)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests, Constraints: constraints}}}
}

// withAllocation is the claim after the scheduler wrote its allocation and
// reserved it for a pod.
func withAllocation(c *resourceapi.ResourceClaim, a resourceapi.AllocationResult, pod string) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.Status.Allocation = &a
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID(pod)}}
	return c
}

var sameNUMANode = []resourceapi.DeviceConstraint{{Requests: []string{"cpus", "nic"}, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(AttrNUMANode))}}

// "4 exclusive CPUs on the NIC's NUMA node": the scheduler puts the CPU
// slots on the NIC's node, and Prepare pins CPUs of that node.
func TestSchedulerAlignsCPUsWithANIC(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	topo, _ := s.Layout()
	cls := shippedClasses(t)
	sl := append(ourSlices(t, s), published(nicDriver, map[string][]resourceapi.Device{testNode: {nicOn("eth5", 5)}})...)

	claim := claimFor("uid-1", sameNUMANode, request("nic", "nic", 1), request("cpus", "cpupool-exclusive", 4))
	res := schedule(t, cls, sl, nil, claim)
	require.Len(t, res, 1)
	for _, r := range res[0].Devices.Results {
		if r.Driver == DriverName {
			pool, numa, err := ParseSlotName(r.Device)
			require.NoError(t, err)
			assert.Equal(t, pools.Exclusive, pool)
			assert.Equal(t, 5, numa, "slot %s is on the NIC's node", r.Device)
		}
	}

	d := newTestDriver(t, s)
	prep := prepare(t, d.Driver, withAllocation(claim, res[0], "pod-1"))["uid-1"]
	require.NoError(t, prep.Err)
	assert.Len(t, prep.Devices, 4, "our devices only; the NIC is its driver's")
	cpus := cpusOf(t, d.Driver, "uid-1", "cpus")
	assert.Equal(t, 4, cpus.Size())
	assert.Equal(t, "[5]", numaOf(topo, cpus))

	// Without the constraint the scheduler takes the first free slots:
	// node 0, away from the NIC. The constraint is what aligns.
	loose := claimFor("uid-2", nil, request("cpus", "cpupool-exclusive", 4), request("nic", "nic", 1))
	res = schedule(t, cls, sl, nil, loose)
	require.Len(t, res, 1)
	_, numa, _ := ParseSlotName(res[0].Devices.Results[0].Device)
	assert.Equal(t, 0, numa)
}

// A claim that cannot be aligned is not allocated: the pod stays
// Pending (unschedulable) instead of running across the interconnect.
func TestSchedulerLeavesAnUnalignableClaimUnallocated(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	cls := shippedClasses(t)
	sl := append(ourSlices(t, s), published(nicDriver, map[string][]resourceapi.Device{testNode: {nicOn("eth5", 5)}})...)
	// Node 5's 48 exclusive slots are taken but 2.
	taken := sets.New[structured.DeviceID]()
	for i := range 46 {
		taken.Insert(structured.MakeDeviceID(DriverName, testNode, SlotName(pools.Exclusive, 5, i)))
	}
	claim := claimFor("uid-1", sameNUMANode, request("nic", "nic", 1), request("cpus", "cpupool-exclusive", 4))
	assert.Empty(t, schedule(t, cls, sl, taken, claim))
	small := claimFor("uid-2", sameNUMANode, request("nic", "nic", 1), request("cpus", "cpupool-exclusive", 2))
	assert.Len(t, schedule(t, cls, sl, taken, small), 1, "what still fits on the NIC's node is allocated")
}

// The claim the scheduler makes for a container that asks for
// cpupool.dev/exclusive: N (DRAExtendedResource) is a count request of the
// class that names the resource; it is served like any other.
func TestSchedulerServesTheExtendedResourceShape(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	cls := shippedClasses(t)
	var class string
	for name, c := range cls {
		if c.Spec.ExtendedResourceName != nil && *c.Spec.ExtendedResourceName == "cpupool.dev/exclusive" {
			class = name
		}
	}
	require.Equal(t, "cpupool-exclusive", class)
	claim := claimFor("uid-1", nil, request("container-0-request-0", class, 6))
	res := schedule(t, cls, ourSlices(t, s), nil, claim)
	require.Len(t, res, 1)
	d := newTestDriver(t, s)
	require.NoError(t, prepare(t, d.Driver, withAllocation(claim, res[0], "pod-1"))["uid-1"].Err)
	assert.Equal(t, 6, cpusOf(t, d.Driver, "uid-1", "container-0-request-0").Size())
}

// The scheduler's count and the driver's CPUs agree exactly: claims that
// fill every slot of a node are all prepared, on distinct CPUs that are
// the node's whole exclusive pool; one more slot is not offered.
func TestSchedulerAndDriverCountTheSameCPUs(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	topo, layout := s.Layout()
	cls := shippedClasses(t)
	sl := ourSlices(t, s)
	d := newTestDriver(t, s)
	node := 3
	pinned := map[int]bool{}
	taken := sets.New[structured.DeviceID]()
	for i, size := range []int64{5, 1, 7, 3, 8, 2, 6, 4, 12} { // 48
		uid := "uid-" + strconv.Itoa(i)
		claim := claimFor(uid, nil, request("cpus", "cpupool-exclusive", size))
		claim.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.attributes["resource.kubernetes.io"].numaNode == ` + strconv.Itoa(node)}}}
		res := schedule(t, cls, sl, taken, claim)
		require.Len(t, res, 1, "claim %d", i)
		for _, r := range res[0].Devices.Results {
			taken.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
		require.NoError(t, prepare(t, d.Driver, withAllocation(claim, res[0], "pod-"+uid))[types.UID(uid)].Err)
		for _, c := range cpusOf(t, d.Driver, uid, "cpus").List() {
			assert.False(t, pinned[c], "CPU %d given twice", c)
			pinned[c] = true
		}
	}
	want := layout.Exclusive.Intersection(mustNode(t, topo, node))
	assert.Equal(t, want.Size(), len(pinned))
	one := claimFor("uid-x", nil, request("cpus", "cpupool-exclusive", 1))
	one.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: `device.attributes["resource.kubernetes.io"].numaNode == 3`}}}
	assert.Empty(t, schedule(t, cls, sl, taken, one))
}
