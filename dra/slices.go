package dra

import (
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// capacityHugePagesPrefix starts the capacity of one hugepage size, in
// bytes: cpupool.dev/hugepages2Mi, cpupool.dev/hugepages1Gi. A capacity's
// name after the domain is a C identifier, so the resource's own name
// (hugepages-2Mi) cannot be used.
const capacityHugePagesPrefix = DriverName + "/hugepages"

// CapacityHugePages names the capacity of a page size.
func CapacityHugePages(sizeKB int64) resourceapi.QualifiedName {
	return resourceapi.QualifiedName(capacityHugePagesPrefix + sysfs.HugePageSizeName(sizeKB))
}

// hugePagesCapacitySize is the page size in KiB a capacity names, false
// for another capacity.
func hugePagesCapacitySize(name resourceapi.QualifiedName) (int64, bool) {
	size, ok := strings.CutPrefix(string(name), capacityHugePagesPrefix)
	if !ok {
		return 0, false
	}
	kb, err := config.HugePageSizeKB(size)
	if err != nil || CapacityHugePages(kb) != name {
		return 0, false
	}
	return kb, true
}

// Resources turns the groups into the driver's ResourceSlices in a model:
// one pool named after the node, slices of at most 128 devices (the API's
// limit), devices in the groups' order. An empty offer still publishes one
// empty slice, which tells the scheduler the node has nothing rather than
// that its driver has not spoken.
func Resources(nodeName, model string, groups []Group) resourceslice.DriverResources {
	var slices []resourceslice.Slice
	var devices []resourceapi.Device
	add := func(dev resourceapi.Device) {
		if len(devices) == resourceapi.ResourceSliceMaxDevices {
			slices = append(slices, resourceslice.Slice{Devices: devices})
			devices = nil
		}
		devices = append(devices, dev)
	}
	for _, g := range groups {
		switch {
		case g.Slots == 0:
		case model == ModelCPU:
			for i := range g.Slots {
				add(device(g, SlotName(g.Pool, g.NUMA, i), model))
			}
		default:
			dev := device(g, GroupName(g.Pool, g.NUMA), model)
			dev.AllowMultipleAllocations = ptr.To(true)
			dev.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapacityCPUs: {
				Value: *resource.NewQuantity(int64(g.Slots), resource.DecimalSI), RequestPolicy: wholeCPUs(g.Slots)}}
			memoryCapacities(g, dev.Capacity)
			add(dev)
		}
	}
	if len(devices) > 0 || len(slices) == 0 {
		slices = append(slices, resourceslice.Slice{Devices: devices})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: {Slices: slices}}}
}

// wholeCPUs is the request policy of a ModelNUMANode device: whole CPUs (a
// request of 1500m takes 2), one when a request names none. The API wants
// min + step within the capacity, so a device of one CPU lists its one
// valid value instead.
func wholeCPUs(capacity int) *resourceapi.CapacityRequestPolicy {
	one := resource.MustParse("1")
	p := &resourceapi.CapacityRequestPolicy{Default: &one}
	if capacity < 2 {
		p.ValidValues = []resource.Quantity{one}
	} else {
		p.ValidRange = &resourceapi.CapacityRequestPolicyRange{Min: &one, Step: &one}
	}
	return p
}

// memoryCapacities adds the node's memory and hugepages to a device's
// capacities, when the group carries them. A request that names none of
// them consumes none (a default of 0: without one, a request would consume
// the whole capacity, and a claim for CPUs alone would take the node's
// memory). Hugepages are consumed in whole pages: a request is rounded up
// to a multiple of the page size.
func memoryCapacities(g Group, caps map[resourceapi.QualifiedName]resourceapi.DeviceCapacity) {
	if g.Memory == nil {
		return
	}
	zero := resource.MustParse("0")
	if g.Memory.Memory >= 0 {
		caps[CapacityMemory] = resourceapi.DeviceCapacity{Value: *resource.NewQuantity(g.Memory.Memory, resource.BinarySI),
			RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: &zero}}
	}
	for _, p := range g.Memory.HugePages {
		size := p.SizeKB * 1024
		value := *resource.NewQuantity(p.Count*size, resource.BinarySI)
		policy := &resourceapi.CapacityRequestPolicy{Default: &zero}
		if p.Count > 0 {
			// The API wants min + step within the capacity: a node without
			// a page of the size lists 0 as its one valid value.
			policy.ValidRange = &resourceapi.CapacityRequestPolicyRange{Min: &zero, Step: resource.NewQuantity(size, resource.BinarySI)}
		} else {
			policy.ValidValues = []resource.Quantity{zero}
		}
		caps[CapacityHugePages(p.SizeKB)] = resourceapi.DeviceCapacity{Value: value, RequestPolicy: policy}
	}
}

// device is a group's device, with its attributes.
func device(g Group, name, model string) resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		AttrPool:  {StringValue: ptr.To(g.Pool)},
		AttrModel: {StringValue: ptr.To(model)},
	}
	if g.NUMA != sysfs.Unknown {
		attrs[AttrNUMANode] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(g.NUMA))}
	}
	if g.Socket != sysfs.Unknown {
		attrs[AttrSocket] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(g.Socket))}
	}
	return resourceapi.Device{Name: name, Attributes: attrs}
}
