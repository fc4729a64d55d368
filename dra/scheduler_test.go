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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/cpuset"
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

func ourSlices(t *testing.T, p Pools, model string, heldOutside map[string]cpuset.CPUSet) []*resourceapi.ResourceSlice {
	t.Helper()
	topo, layout := p.Layout()
	res := Resources(testNode, model, WithMemory(Offer(topo, layout, heldOutside), p.MemoryOffer()))
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

// schedule runs the scheduler's allocator for claims on a node where
// nothing is allocated yet; nil means unschedulable.
func schedule(t *testing.T, cls classes, sl []*resourceapi.ResourceSlice, claims ...*resourceapi.ResourceClaim) []resourceapi.AllocationResult {
	t.Helper()
	return scheduleIn(t, cls, sl, structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}, claims...)
}

// scheduleIn runs it with what is allocated already; features are
// kube-scheduler 1.36's defaults.
func scheduleIn(t *testing.T, cls classes, sl []*resourceapi.ResourceSlice, state structured.AllocatedState, claims ...*resourceapi.ResourceClaim) []resourceapi.AllocationResult {
	t.Helper()
	res, err := allocate(t, cls, sl, state, claims...)
	require.NoError(t, err)
	return res
}

// allocate is scheduleIn that returns the allocator's error: what the
// scheduler's Filter reports, and the pod's Pending reason.
func allocate(t *testing.T, cls classes, sl []*resourceapi.ResourceSlice, state structured.AllocatedState, claims ...*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	t.Helper()
	features := structured.Features{AdminAccess: true, ConsumableCapacity: true, DeviceBindingAndStatus: true, DeviceTaints: true,
		PartitionableDevices: true, PrioritizedList: true}
	a, err := structured.NewAllocator(context.Background(), features, state, cls, sl, cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}))
	require.NoError(t, err)
	return a.Allocate(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, claims)
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

// capacity asks for n CPUs of one ModelNUMANode device.
func capacity(r resourceapi.DeviceRequest, n int64) resourceapi.DeviceRequest {
	r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
		CapacityCPUs: *resource.NewQuantity(n, resource.DecimalSI)}}
	return r
}

// nodesOf returns the NUMA nodes of our devices in an allocation.
func nodesOf(t *testing.T, a resourceapi.AllocationResult) []int {
	t.Helper()
	var out []int
	for _, r := range a.Devices.Results {
		if r.Driver == DriverName {
			_, numa, _, err := ParseDeviceName(r.Device)
			require.NoError(t, err)
			out = append(out, numa)
		}
	}
	return out
}

// "8 exclusive CPUs on the NIC's NUMA node", in the default model: one
// request of capacity 8, one device, on the NIC's node, in any order of
// the requests; Prepare pins 8 CPUs of that node.
func TestSchedulerAlignsCPUsWithANIC(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	topo, _ := s.Layout()
	cls := shippedClasses(t)
	sl := append(ourSlices(t, s, ModelNUMANode, nil), published(nicDriver, map[string][]resourceapi.Device{testNode: {nicOn("eth5", 5)}})...)

	claim := claimFor("uid-1", sameNUMANode, capacity(request("cpus", "cpupool-exclusive", 1), 8), request("nic", "nic", 1))
	res := schedule(t, cls, sl, claim)
	require.Len(t, res, 1)
	assert.Equal(t, []int{5}, nodesOf(t, res[0]))
	cpusResult := res[0].Devices.Results[0]
	require.NotNil(t, cpusResult.ShareID, "a share of the node's device")
	assert.Equal(t, "8", ptr.To(cpusResult.ConsumedCapacity[CapacityCPUs]).String())

	d := newTestDriver(t, s)
	prep := prepare(t, d.Driver, withAllocation(claim, res[0], "pod-1"))["uid-1"]
	require.NoError(t, prep.Err)
	require.Len(t, prep.Devices, 1, "our device only; the NIC is its driver's")
	assert.Equal(t, cpusResult.ShareID, prep.Devices[0].ShareID)
	cpus := cpusOf(t, d.Driver, "uid-1", "cpus")
	assert.Equal(t, 8, cpus.Size())
	assert.Equal(t, "[5]", numaOf(topo, cpus))
	assert.Equal(t, "120-123,312-315", cpus.String(), "four whole cores of one L3 group")

	// Requests in the other order: the same.
	swapped := claimFor("uid-2", sameNUMANode, request("nic", "nic", 1), capacity(request("cpus", "cpupool-exclusive", 1), 8))
	res = schedule(t, cls, sl, swapped)
	require.Len(t, res, 1)
	assert.Equal(t, []int{5}, nodesOf(t, res[0]))

	// A request never spans NUMA nodes in this model: 48 CPUs fit no node
	// (node 0 has 40, each other node 48 but one is asked with a NIC).
	tooBig := claimFor("uid-3", sameNUMANode, capacity(request("cpus", "cpupool-exclusive", 1), 49), request("nic", "nic", 1))
	assert.Empty(t, schedule(t, cls, sl, tooBig))
}

// A claim that cannot be aligned is not allocated: the pod stays Pending
// (unschedulable) instead of running across the interconnect.
func TestSchedulerLeavesAnUnalignableClaimUnallocated(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	topo, layout := s.Layout()
	cls := shippedClasses(t)
	nic := published(nicDriver, map[string][]resourceapi.Device{testNode: {nicOn("eth5", 5)}})
	// All but 2 of node 5's exclusive CPUs are held.
	held := map[string]cpuset.CPUSet{pools.Exclusive: cpuset.New(layout.Exclusive.Intersection(mustNode(t, topo, 5)).List()[2:]...)}
	for _, model := range Models() {
		t.Run(model, func(t *testing.T) {
			sl := append(ourSlices(t, s, model, held), nic...)
			cpus := func(n int64) resourceapi.DeviceRequest {
				if model == ModelCPU {
					return request("cpus", "cpupool-exclusive", n)
				}
				return capacity(request("cpus", "cpupool-exclusive", 1), n)
			}
			// In the cpu model, the NIC request comes first: see
			// TestCPUModelSearchOrder.
			claim := claimFor("uid-1", sameNUMANode, request("nic", "nic", 1), cpus(4))
			assert.Empty(t, schedule(t, cls, sl, claim))
			small := claimFor("uid-2", sameNUMANode, request("nic", "nic", 1), cpus(2))
			res := schedule(t, cls, sl, small)
			require.Len(t, res, 1, "what still fits on the NIC's node is allocated")
			for _, n := range nodesOf(t, res[0]) {
				assert.Equal(t, 5, n)
			}
		})
	}
}

// In the cpu model every CPU is a device, and the scheduler's search
// backtracks over them: with the CPU request before its constraint partner
// it tries combinations of interchangeable devices, which grows with the
// node's free CPUs (4 CPUs and a NIC on the far node of an 80-CPU node
// took 2.8 s on the development VM; 8 CPUs did not finish in 10 minutes,
// far beyond the scheduler's 10 s filter timeout). With the partner first
// the constraint fixes the node before any CPU is tried, and the search
// is linear. This is why numaNode is the default model.
func TestCPUModelSearchOrder(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	cls := shippedClasses(t)
	sl := append(ourSlices(t, s, ModelCPU, nil), published(nicDriver, map[string][]resourceapi.Device{testNode: {nicOn("eth5", 5)}})...)
	claim := claimFor("uid-1", sameNUMANode, request("nic", "nic", 1), request("cpus", "cpupool-exclusive", 16))
	res := schedule(t, cls, sl, claim)
	require.Len(t, res, 1)
	for _, n := range nodesOf(t, res[0]) {
		assert.Equal(t, 5, n)
	}
	// Without any constraint the scheduler takes the first free slots:
	// node 0, whatever the NIC.
	loose := claimFor("uid-2", nil, request("cpus", "cpupool-exclusive", 4), request("nic", "nic", 1))
	res = schedule(t, cls, sl, loose)
	require.Len(t, res, 1)
	assert.Equal(t, []int{0, 0, 0, 0}, nodesOf(t, res[0]))
}

// The claim the scheduler makes for a container that asks for
// cpupool.dev/exclusive: N (DRAExtendedResource) is a count request of the
// class that names the resource. That class selects the cpu model's
// devices only: a count of numaNode devices would be one CPU on each of N
// nodes.
func TestSchedulerServesTheExtendedResourceShape(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	cls := shippedClasses(t)
	var class string
	for name, c := range cls {
		if c.Spec.ExtendedResourceName != nil && *c.Spec.ExtendedResourceName == "cpupool.dev/exclusive" {
			class = name
		}
	}
	require.Equal(t, "cpupool-exclusive-cpus", class)
	claim := claimFor("uid-1", nil, request("container-0-request-0", class, 6))
	res := schedule(t, cls, ourSlices(t, s, ModelCPU, nil), claim)
	require.Len(t, res, 1)
	d := newTestDriver(t, s)
	require.NoError(t, prepare(t, d.Driver, withAllocation(claim, res[0], "pod-1"))["uid-1"].Err)
	assert.Equal(t, 6, cpusOf(t, d.Driver, "uid-1", "container-0-request-0").Size())

	assert.Empty(t, schedule(t, cls, ourSlices(t, s, ModelNUMANode, nil), claim), "not served by numaNode devices")
}

// The scheduler's count and the driver's CPUs agree exactly, in both
// models: claims that fill a node are all prepared, on distinct CPUs that
// are the node's whole exclusive pool; one more CPU is not offered.
func TestSchedulerAndDriverCountTheSameCPUs(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	topo, layout := s.Layout()
	cls := shippedClasses(t)
	node := 3
	onNode := []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: `device.attributes["resource.kubernetes.io"].numaNode == ` + strconv.Itoa(node)}}}
	for _, model := range Models() {
		t.Run(model, func(t *testing.T) {
			sl := ourSlices(t, s, model, nil)
			d := newTestDriver(t, s)
			ask := func(uid string, n int64) *resourceapi.ResourceClaim {
				r := request("cpus", "cpupool-exclusive", n)
				if model == ModelNUMANode {
					r = capacity(request("cpus", "cpupool-exclusive", 1), n)
				}
				r.Exactly.Selectors = onNode
				return claimFor(uid, nil, r)
			}
			pinned := map[int]bool{}
			state := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
				AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
			for i, size := range []int64{5, 1, 7, 3, 8, 2, 6, 4, 12} { // 48
				uid := "uid-" + strconv.Itoa(i)
				claim := ask(uid, size)
				res := scheduleIn(t, cls, sl, state, claim)
				require.Len(t, res, 1, "claim %d", i)
				for _, r := range res[0].Devices.Results {
					id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
					if r.ShareID == nil {
						state.AllocatedDevices.Insert(id)
					} else {
						state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
						state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
					}
				}
				require.NoError(t, prepare(t, d.Driver, withAllocation(claim, res[0], "pod-"+uid))[types.UID(uid)].Err)
				for _, c := range cpusOf(t, d.Driver, uid, "cpus").List() {
					assert.False(t, pinned[c], "CPU %d given twice", c)
					pinned[c] = true
				}
			}
			assert.Equal(t, layout.Exclusive.Intersection(mustNode(t, topo, node)).Size(), len(pinned))
			assert.Empty(t, scheduleIn(t, cls, sl, state, ask("uid-x", 1)))
		})
	}
}
