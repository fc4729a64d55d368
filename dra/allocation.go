package dra

// What the scheduler allocated to a claim from this driver, read from the
// claim's status (counts of CPUs, memory and hugepages by pool and NUMA
// node), with the bounds that keep the API server's numbers sane, and
// whether a prepared claim was prepared for the same allocation.

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// wanted is what the scheduler allocated to one request of a claim.
type wanted struct {
	pool  string
	slots map[int]int
	// memory is the memory and hugepages it consumed, by node; nil when
	// none.
	memory map[int]*NodeMemory
}

// memoryList is w.memory in node order.
func (w wanted) memoryList() []NodeMemory {
	var out []NodeMemory
	for _, n := range slices.Sorted(maps.Keys(w.memory)) {
		out = append(out, *w.memory[n])
	}
	return out
}

// allocated reads what the scheduler allocated from this driver, by
// request: one pool each, slots by NUMA node. Opaque config for this
// driver is judged by prepare (refuseOpaqueConfig), which knows whether
// the claim was prepared before.
func (d *Driver) allocated(claim *resourceapi.ResourceClaim) (map[string]wanted, error) {
	if claim.Status.Allocation == nil {
		return nil, errors.New("not allocated")
	}
	// The API server refuses a status with more results, so none should
	// come here; one that did would be a claim the scheduler cannot have
	// counted, and its CPUs are not given.
	if n := len(claim.Status.Allocation.Devices.Results); n > MaxResultsPerClaim {
		return nil, fmt.Errorf("the allocation has %d results, more than the API's %d per claim (AllocationResultsMaxSize); in dra.devices: %s a CPU is one result, so a claim of more than %d CPUs needs dra.devices: %s", n, MaxResultsPerClaim, ModelCPU, MaxResultsPerClaim, ModelNUMANode)
	}
	want := map[string]wanted{}
	for _, res := range claim.Status.Allocation.Devices.Results {
		if res.Driver != DriverName {
			continue
		}
		if res.Pool != d.nodeName {
			return nil, fmt.Errorf("device %s is from pool %q, not this node's (%s)", res.Device, res.Pool, d.nodeName)
		}
		if res.AdminAccess != nil && *res.AdminAccess {
			return nil, fmt.Errorf("request %s asks for admin access, which %s does not give: its CPUs belong to one container", res.Request, DriverName)
		}
		pool, numa, slot, err := ParseDeviceName(res.Device)
		if err != nil {
			return nil, err
		}
		n := 1
		var mem NodeMemory
		if !slot {
			if n, err = consumedCPUs(res); err != nil {
				return nil, err
			}
			if mem, err = consumedMemory(res, numa); err != nil {
				return nil, err
			}
		}
		name := resourceclaim.BaseRequestRef(res.Request)
		w, ok := want[name]
		if !ok {
			w = wanted{pool: pool, slots: map[int]int{}}
		}
		if w.pool != pool {
			return nil, fmt.Errorf("request %s was given devices of pools %s and %s; a request's CPUs come from one pool (use a DeviceClass of one pool, e.g. cpupool-%s)", name, w.pool, pool, pools.Exclusive)
		}
		w.slots[numa] += n
		if mem.Memory > 0 || len(mem.HugePages) > 0 {
			if w.memory == nil {
				w.memory = map[int]*NodeMemory{}
			}
			if have := w.memory[numa]; have != nil {
				have.Memory += mem.Memory
				if have.HugePages == nil && len(mem.HugePages) > 0 {
					have.HugePages = map[int64]int64{}
				}
				for size, pages := range mem.HugePages {
					have.HugePages[size] += pages
				}
			} else {
				w.memory[numa] = &mem
			}
		}
		want[name] = w
	}
	return want, nil
}

// consumedCPUs is the number of CPUs a share of a ModelNUMANode device
// stands for: the capacity the scheduler counted.
func consumedCPUs(res resourceapi.DeviceRequestAllocationResult) (int, error) {
	q, ok := res.ConsumedCapacity[CapacityCPUs]
	if !ok {
		return 0, fmt.Errorf("device %s was allocated without consumed capacity %s; the scheduler needs the DRAConsumableCapacity feature (beta, on by default since 1.36) for dra.devices: %s, or use dra.devices: %s", res.Device, CapacityCPUs, ModelNUMANode, ModelCPU)
	}
	n, ok := q.AsInt64()
	if !ok || n < 1 || n > maxCPUs {
		return 0, fmt.Errorf("device %s was allocated %s CPUs; a request takes a whole number of CPUs", res.Device, q.String())
	}
	return int(n), nil
}

// maxCPUs bounds a count from the API server.
const maxCPUs = 1 << 16

// maxBytes bounds an amount of memory from the API server or the claims
// file: 1 PiB, beyond any node, and nothing overflows below it.
const maxBytes = int64(1) << 50

// consumedMemory is the memory and hugepages a share of a ModelNUMANode
// device stands for: the capacities cpupool.dev/memory and
// cpupool.dev/hugepages<size> the scheduler counted, on the device's node.
// Hugepages are whole pages (the device's request policy rounds a request
// up to the page size).
func consumedMemory(res resourceapi.DeviceRequestAllocationResult, numa int) (NodeMemory, error) {
	nm := NodeMemory{Node: numa}
	for _, name := range slices.Sorted(maps.Keys(res.ConsumedCapacity)) {
		q := res.ConsumedCapacity[name]
		sizeKB, isPages := hugePagesCapacitySize(name)
		if name != CapacityMemory && !isPages {
			continue
		}
		b, ok := q.AsInt64()
		if !ok || b < 0 || b > maxBytes {
			return NodeMemory{}, fmt.Errorf("device %s was allocated %s of %s; that is no amount of memory", res.Device, q.String(), name)
		}
		if b == 0 {
			continue
		}
		if numa == sysfs.Unknown {
			return NodeMemory{}, fmt.Errorf("device %s was allocated %s of %s, on no NUMA node", res.Device, q.String(), name)
		}
		if !isPages {
			nm.Memory = b
			continue
		}
		size := sizeKB * 1024
		if nm.HugePages == nil {
			nm.HugePages = map[int64]int64{}
		}
		nm.HugePages[sizeKB] = (b + size - 1) / size
	}
	return nm, nil
}

// sameAllocation tells whether a prepared claim was prepared for want.
func sameAllocation(c *Claim, want map[string]wanted) bool {
	if len(c.Requests) != len(want) {
		return false
	}
	for name, w := range want {
		r, ok := c.Requests[name]
		if !ok || r.Pool != w.pool || !reflect.DeepEqual(r.Slots, w.slots) || !sameMemory(r.Memory, w.memoryList()) {
			return false
		}
	}
	return true
}

// sameMemory tells whether two requests' memory is the same.
func sameMemory(a, b []NodeMemory) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Node != b[i].Node || a[i].Memory != b[i].Memory || !maps.Equal(a[i].HugePages, b[i].HugePages) {
			return false
		}
	}
	return true
}
