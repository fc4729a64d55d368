package dra

import (
	"fmt"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// The attributes of every device. numaNode is the standard name other
// drivers (dranet, GPU drivers) publish too, so that a claim can align our
// CPUs with their devices by matchAttribute.
const (
	AttrNUMANode = "resource.kubernetes.io/numaNode"
	AttrPool     = DriverName + "/pool"
	AttrSocket   = DriverName + "/socket"
)

// Group is the slots of one pool on one NUMA node: that many of the pool's
// CPUs there may be allocated to claims. Slots are interchangeable; which
// CPUs a claim gets is decided at Prepare.
type Group struct {
	Pool string
	// NUMA is the node, sysfs.Unknown for CPUs the kernel puts on none.
	NUMA int
	// Socket is the node's socket, sysfs.Unknown if its CPUs span several.
	Socket int
	Slots  int
}

// Offer computes the slots the node offers: for each exclusive pool and
// NUMA node, the pool's CPUs there, less those containers hold without a
// claim (heldOutside: an exclusive container from before the driver was
// on keeps its CPUs, so the scheduler must not count them). For
// exclusive-non-isolcpus, which lends infra's CPUs, the slots also leave
// infra its minInfraCPUs: the slots the budget does not cover are taken
// from the highest NUMA nodes. Groups come in pool order, then by node.
func Offer(topo *sysfs.Topology, layout *allocator.Layout, heldOutside map[string]cpuset.CPUSet) []Group {
	var out []Group
	for _, pool := range []string{pools.Exclusive, pools.ExclusiveNonIsolcpus} {
		cpus := layout.Pool(pool)
		if cpus.IsEmpty() {
			continue
		}
		held := heldOutside[pool]
		groups := groupByNode(topo, cpus, held, pool)
		if pool == pools.ExclusiveNonIsolcpus {
			// Lending every lendable CPU leaves infra its reserved CPUs;
			// what minInfraCPUs asks beyond them (less what outside
			// containers already borrowed) is not offered.
			keep := layout.Infra.Size() - cpus.Size()
			deficit := layout.MinInfraCPUs - keep
			for i := len(groups) - 1; i >= 0 && deficit > 0; i-- {
				d := min(deficit, groups[i].Slots)
				groups[i].Slots -= d
				deficit -= d
			}
		}
		out = append(out, groups...)
	}
	return out
}

// groupByNode counts a pool's CPUs on each NUMA node, less held.
func groupByNode(topo *sysfs.Topology, cpus, held cpuset.CPUSet, pool string) []Group {
	var out []Group
	index := map[int]int{}
	for _, c := range topo.CPUs {
		if !c.Online || !cpus.Contains(c.ID) {
			continue
		}
		i, ok := index[c.NUMA]
		if !ok {
			i = len(out)
			index[c.NUMA] = i
			out = append(out, Group{Pool: pool, NUMA: c.NUMA, Socket: c.Socket})
		}
		if out[i].Socket != c.Socket {
			out[i].Socket = sysfs.Unknown
		}
		if !held.Contains(c.ID) {
			out[i].Slots++
		}
	}
	// Node order: CPUs come sorted by id, nodes may not.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].NUMA < out[j-1].NUMA; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Resources turns the groups into the driver's ResourceSlices: one pool
// named after the node, slices of at most 128 devices (the API's limit),
// devices in the groups' order. An empty offer still publishes one empty
// slice, which tells the scheduler the node has nothing rather than that
// its driver has not spoken.
func Resources(nodeName string, groups []Group) resourceslice.DriverResources {
	var slices []resourceslice.Slice
	var devices []resourceapi.Device
	for _, g := range groups {
		for i := range g.Slots {
			if len(devices) == resourceapi.ResourceSliceMaxDevices {
				slices = append(slices, resourceslice.Slice{Devices: devices})
				devices = nil
			}
			devices = append(devices, g.device(i))
		}
	}
	if len(devices) > 0 || len(slices) == 0 {
		slices = append(slices, resourceslice.Slice{Devices: devices})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: {Slices: slices}}}
}

func (g Group) device(i int) resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		AttrPool: {StringValue: ptr.To(g.Pool)},
	}
	if g.NUMA != sysfs.Unknown {
		attrs[AttrNUMANode] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(g.NUMA))}
	}
	if g.Socket != sysfs.Unknown {
		attrs[AttrSocket] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(g.Socket))}
	}
	return resourceapi.Device{Name: SlotName(g.Pool, g.NUMA, i), Attributes: attrs}
}

// SlotName names slot i of a pool on a NUMA node: "exclusive-numa1-7",
// "exclusive-non-isolcpus-nonuma-0". The name says nothing of a CPU: slots
// are interchangeable.
func SlotName(pool string, numa, i int) string {
	node := "nonuma"
	if numa != sysfs.Unknown {
		node = "numa" + strconv.Itoa(numa)
	}
	return pool + "-" + node + "-" + strconv.Itoa(i)
}

// ParseSlotName returns the pool and NUMA node of a slot's name.
func ParseSlotName(name string) (pool string, numa int, err error) {
	bad := func() (string, int, error) {
		if len(name) > 64 {
			name = name[:64] + "..."
		}
		return "", 0, fmt.Errorf("device %q is not a slot of %s (<pool>-numa<node>-<n>)", name, DriverName)
	}
	rest, idx, ok := cutLast(name, "-")
	if !ok {
		return bad()
	}
	if _, err := strconv.Atoi(idx); err != nil {
		return bad()
	}
	pool, node, ok := cutLast(rest, "-")
	if !ok || !pools.IsExclusive(pool) {
		return bad()
	}
	if node == "nonuma" {
		return pool, sysfs.Unknown, nil
	}
	n, ok := strings.CutPrefix(node, "numa")
	if !ok {
		return bad()
	}
	numa, err = strconv.Atoi(n)
	if err != nil || numa < 0 || strconv.Itoa(numa) != n {
		return bad()
	}
	return pool, numa, nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
