package dracore

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/numamem"
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
	// Memory is what claims may have of the node's memory and hugepages,
	// on the one device of the node that carries them (WithMemory); nil
	// on the others.
	Memory *numamem.NodeOffer
}

// WithMemory puts each NUMA node's memory offer on the first group of that
// node: the first exclusive pool, in pool order (exclusive, then
// exclusive-non-isolcpus), that has CPUs there as configured. A node's
// memory is one: two devices carrying it would offer the same bytes twice,
// since the scheduler counts each device's capacity apart. The rule reads
// the layout, not the free slots, so that the memory does not move while
// the pools stay as they are; WithMemoryHeld keeps it where claims hold
// some of it when they do not. A node with memory and no CPU of an
// exclusive pool (a memory-only node) offers none.
func WithMemory(groups []Group, offer []numamem.NodeOffer) []Group {
	return WithMemoryHeld(groups, offer, nil)
}

// WithMemoryHeld is WithMemory for a node whose memory prepared claims
// hold some of: heldBy names, by node, the pool of the device they were
// allocated it on. The scheduler charged their memory to that device's
// capacity only, so the node's memory stays there whatever the layout says
// now: on another device the same bytes would be allocated again. When that
// device has no group (its pool has no CPU online on the node: they went
// offline, or a reload gave them to another pool) the node's memory is not
// offered at all until the claims are unprepared or the device comes back.
func WithMemoryHeld(groups []Group, offer []numamem.NodeOffer, heldBy map[int]string) []Group {
	for _, o := range offer {
		pool, held := heldBy[o.Node]
		for i := range groups {
			if groups[i].NUMA != o.Node || held && groups[i].Pool != pool {
				continue
			}
			o := o
			groups[i].Memory = &o
			break
		}
	}
	return groups
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
			// Lending every lendable CPU leaves infra its reserved and
			// isolated CPUs; what minInfraCPUs asks beyond the balanced
			// ones (less what outside containers already borrowed) is
			// not offered (Layout.MaxLent).
			deficit := cpus.Size() - layout.MaxLent()
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

// The device models (config dra.devices). Both describe the same slots;
// they differ in what the scheduler can express (see docs/dra.md).
const (
	// ModelNUMANode publishes one device per pool and NUMA node that many
	// claims share, with the consumable capacity cpupool.dev/cpus: a
	// request asks for capacity, gets one node, and a constraint such as
	// matchAttribute is decided over a handful of devices.
	ModelNUMANode = config.DRADevicesNUMANode
	// ModelCPU publishes one device per CPU slot: a request counts
	// devices, which is what the extended-resource alias
	// (cpupool.dev/exclusive: N) asks for.
	ModelCPU = config.DRADevicesCPU
)

// Models lists the device models.
func Models() []string { return []string{ModelNUMANode, ModelCPU} }

// CapacityCPUs is the consumable capacity of a ModelNUMANode device: its
// free CPUs.
const CapacityCPUs = DriverName + "/cpus"

// CapacityMemory is the consumable capacity of a ModelNUMANode device that
// carries its node's memory: bytes, counted against memory limits.
const CapacityMemory = DriverName + "/memory"

// AttrModel tells a device's model, so that a DeviceClass can select one
// (the extended-resource alias counts devices: only ModelCPU fits it).
const AttrModel = DriverName + "/model"

// GroupName names the ModelNUMANode device of a pool on a NUMA node:
// "exclusive-numa1", "exclusive-non-isolcpus-nonuma".
func GroupName(pool string, numa int) string { return pool + "-" + nodePart(numa) }

// SlotName names ModelCPU slot i of a pool on a NUMA node:
// "exclusive-numa1-7". The name says nothing of a CPU: slots are
// interchangeable.
func SlotName(pool string, numa, i int) string {
	return GroupName(pool, numa) + "-" + strconv.Itoa(i)
}

func nodePart(numa int) string {
	if numa == sysfs.Unknown {
		return "nonuma"
	}
	return "numa" + strconv.Itoa(numa)
}

// ParseDeviceName returns the pool and NUMA node of a device's name, and
// whether it is a ModelCPU slot.
func ParseDeviceName(name string) (pool string, numa int, slot bool, err error) {
	bad := func() (string, int, bool, error) {
		if len(name) > 64 {
			name = name[:64] + "..."
		}
		return "", 0, false, fmt.Errorf("device %q is not a device of %s (<pool>-numa<node>, or <pool>-numa<node>-<n>)", name, DriverName)
	}
	rest := name
	if before, idx, ok := cutLast(name, "-"); ok && idx != "" && strings.Trim(idx, "0123456789") == "" {
		if idx != strconv.Itoa(mustAtoi(idx)) {
			return bad()
		}
		rest, slot = before, true
	}
	pool, node, ok := cutLast(rest, "-")
	if !ok || !pools.IsExclusive(pool) {
		return bad()
	}
	if node == "nonuma" {
		return pool, sysfs.Unknown, slot, nil
	}
	n, ok := strings.CutPrefix(node, "numa")
	if !ok {
		return bad()
	}
	numa, err = strconv.Atoi(n)
	if err != nil || numa < 0 || strconv.Itoa(numa) != n {
		return bad()
	}
	return pool, numa, slot, nil
}

// mustAtoi parses digits, -1 when they overflow.
func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
