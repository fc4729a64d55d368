package main

// The check after a claims phase: the allocations against the slices (no
// device given beyond its capacity, the CPUs on the NIC's NUMA node), and
// the same check on a broken copy of them, which must fail, so that a
// pass says something.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"context"
	"os"

	"github.com/cpupool/nri-cpupool/dra"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// deviceKey names a device: driver, pool (the node) and device name.
type deviceKey struct{ driver, pool, device string }

// offered is what one device offers: its NUMA node and CPUs (a cpu-model
// slot offers one).
type offered struct {
	numa int64
	cpus int64
}

// numaKey is one NUMA node of one node (the pool is named after the node).
type numaKey struct {
	pool string
	numa int64
}

// Verdict is what check found.
type Verdict struct {
	Claims      int // allocated claims checked
	Unallocated int // claims without an allocation
	// OverAllocated lists each NUMA node (or device) given more CPUs than
	// it offers, and each NIC or slot given twice.
	OverAllocated []string
	// Misaligned lists each claim whose CPUs and NIC are not on one NUMA
	// node, or whose devices are unknown or lack the attribute.
	Misaligned []string
	// Fullest is the highest share of a NUMA node's CPUs the claims took.
	Fullest float64
}

// Failed tells whether any rule was broken.
func (v Verdict) Failed() bool { return len(v.OverAllocated)+len(v.Misaligned) > 0 }

func (v Verdict) String() string {
	s := fmt.Sprintf("%d claims allocated, %d not; %d over-allocations, %d misaligned claims; fullest NUMA node %.0f%%",
		v.Claims, v.Unallocated, len(v.OverAllocated), len(v.Misaligned), 100*v.Fullest)
	for _, l := range [][]string{v.OverAllocated, v.Misaligned} {
		for i, m := range l {
			if i == 5 {
				s += fmt.Sprintf("\n  ... and %d more", len(l)-5)
				break
			}
			s += "\n  " + m
		}
	}
	return s
}

// check reads the allocations themselves (ResourceClaim status) against the
// slices: no NUMA node of any node, and no cpupool.dev device, is given
// more CPUs than it offers; no NIC or cpu-model slot is given twice; every
// claim's CPUs and NIC share one NUMA node. cpuRequest and nicRequest name
// the claims' requests.
func check(sliceList []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, cpuRequest, nicRequest string) Verdict {
	var v Verdict
	devices := map[deviceKey]offered{}
	perNUMA := map[numaKey]int64{}
	for _, s := range sliceList {
		for _, d := range s.Spec.Devices {
			k := deviceKey{s.Spec.Driver, s.Spec.Pool.Name, d.Name}
			o := offered{numa: -1}
			if a, ok := d.Attributes[dra.AttrNUMANode]; ok && a.IntValue != nil {
				o.numa = *a.IntValue
			}
			if s.Spec.Driver == dra.DriverName {
				o.cpus = 1
				if c, ok := d.Capacity[dra.CapacityCPUs]; ok {
					o.cpus = c.Value.Value()
				}
				perNUMA[numaKey{s.Spec.Pool.Name, o.numa}] += o.cpus
			}
			devices[k] = o
		}
	}
	usedCPUs := map[deviceKey]int64{}
	usedBy := map[deviceKey][]string{} // devices that cannot be shared: who has them
	gotNUMA := map[numaKey]int64{}
	for _, c := range claims {
		name := c.Namespace + "/" + c.Name
		if c.Status.Allocation == nil {
			v.Unallocated++
			continue
		}
		v.Claims++
		numas := map[int64]bool{}
		var nic, cpus bool
		for _, r := range c.Status.Allocation.Devices.Results {
			k := deviceKey{r.Driver, r.Pool, r.Device}
			o, ok := devices[k]
			if !ok || o.numa < 0 {
				v.Misaligned = append(v.Misaligned, fmt.Sprintf("%s: device %s/%s/%s is in no slice or has no %s", name, r.Driver, r.Pool, r.Device, dra.AttrNUMANode))
				continue
			}
			switch r.Request {
			case cpuRequest:
				cpus = true
				n := int64(1)
				if q, ok := r.ConsumedCapacity[dra.CapacityCPUs]; ok {
					n = q.Value()
				} else {
					usedBy[k] = append(usedBy[k], name) // a slot
				}
				usedCPUs[k] += n
				gotNUMA[numaKey{r.Pool, o.numa}] += n
			case nicRequest:
				nic = true
				usedBy[k] = append(usedBy[k], name)
			}
			numas[o.numa] = true
		}
		if !cpus || !nic || len(numas) != 1 {
			v.Misaligned = append(v.Misaligned, fmt.Sprintf("%s: CPUs %v, NIC %v, on NUMA nodes %v", name, cpus, nic, slices.Sorted(maps.Keys(numas))))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(usedCPUs), cmpDevice) {
		if n, o := usedCPUs[k], devices[k]; n > o.cpus {
			v.OverAllocated = append(v.OverAllocated, fmt.Sprintf("device %s/%s: %d CPUs given, %d offered", k.pool, k.device, n, o.cpus))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(usedBy), cmpDevice) {
		if who := usedBy[k]; len(who) > 1 {
			v.OverAllocated = append(v.OverAllocated, fmt.Sprintf("device %s/%s/%s given %d times: %s", k.driver, k.pool, k.device, len(who), strings.Join(who, ", ")))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(gotNUMA), func(a, b numaKey) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	}) {
		got, has := gotNUMA[k], perNUMA[k]
		if got > has {
			v.OverAllocated = append(v.OverAllocated, fmt.Sprintf("node %s NUMA node %d: %d CPUs given, %d offered", k.pool, k.numa, got, has))
		}
		if has > 0 {
			v.Fullest = max(v.Fullest, float64(got)/float64(has))
		}
	}
	return v
}

func cmpDevice(a, b deviceKey) int {
	return strings.Compare(a.driver+"/"+a.pool+"/"+a.device, b.driver+"/"+b.pool+"/"+b.device)
}

// broken returns the claims with two faults a scheduler bug could make:
// the first allocated claim's NIC moved to a NIC on another NUMA node, and
// a copy of the second allocated claim that takes every CPU of its device
// again. check must find both: it is run on this once per run, so that a
// check that cannot fail is noticed.
func broken(sliceList []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, cpuRequest, nicRequest string) ([]resourceapi.ResourceClaim, error) {
	var out []resourceapi.ResourceClaim
	for _, c := range claims {
		out = append(out, *c.DeepCopy())
	}
	var allocated []int
	for i, c := range out {
		if c.Status.Allocation != nil {
			allocated = append(allocated, i)
		}
	}
	if len(allocated) < 2 {
		return nil, fmt.Errorf("%d allocated claims: two are needed to break", len(allocated))
	}
	// The NIC to another NUMA node of the same node.
	first := out[allocated[0]].Status.Allocation.Devices.Results
	moved := false
	for i, r := range first {
		if r.Request != nicRequest {
			continue
		}
		for _, s := range sliceList {
			if s.Spec.Driver != r.Driver || s.Spec.Pool.Name != r.Pool {
				continue
			}
			for _, d := range s.Spec.Devices {
				if a := d.Attributes[dra.AttrNUMANode].IntValue; a != nil && !moved && numaOf(sliceList, r) != *a {
					first[i].Device = d.Name
					moved = true
				}
			}
		}
	}
	if !moved {
		return nil, fmt.Errorf("claim %s: no NIC on another NUMA node to move it to", out[allocated[0]].Name)
	}
	// The second claim's CPUs given again, the device's whole capacity.
	again := out[allocated[1]].DeepCopy()
	again.Name += "-again"
	for i, r := range again.Status.Allocation.Devices.Results {
		if q, ok := r.ConsumedCapacity[dra.CapacityCPUs]; ok {
			for _, s := range sliceList {
				for _, d := range s.Spec.Devices {
					if s.Spec.Driver == r.Driver && s.Spec.Pool.Name == r.Pool && d.Name == r.Device {
						q = d.Capacity[dra.CapacityCPUs].Value
					}
				}
			}
			again.Status.Allocation.Devices.Results[i].ConsumedCapacity[dra.CapacityCPUs] = q
		}
	}
	return append(out, *again), nil
}

func numaOf(sliceList []resourceapi.ResourceSlice, r resourceapi.DeviceRequestAllocationResult) int64 {
	for _, s := range sliceList {
		for _, d := range s.Spec.Devices {
			if s.Spec.Driver == r.Driver && s.Spec.Pool.Name == r.Pool && d.Name == r.Device {
				if a := d.Attributes[dra.AttrNUMANode].IntValue; a != nil {
					return *a
				}
			}
		}
	}
	return -1
}

// checkClaims checks the namespace's allocations against every slice, then
// that the same check fails on a broken copy of them.
func checkClaims(ctx context.Context, client kubernetes.Interface, ns string) (string, error) {
	sl, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	cl, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	v := check(sl.Items, cl.Items, cpuRequest, nicRequest)
	fmt.Fprintf(os.Stderr, "schedscale: check: %s\n", v)
	if v.Failed() || v.Unallocated > 0 {
		return "FAIL: " + v.String(), nil
	}
	bad, err := broken(sl.Items, cl.Items, cpuRequest, nicRequest)
	if err != nil {
		return "", err
	}
	bv := check(sl.Items, bad, cpuRequest, nicRequest)
	if len(bv.OverAllocated) == 0 || len(bv.Misaligned) == 0 {
		return "FAIL: the check passes a broken copy of the allocations: " + bv.String(), nil
	}
	return fmt.Sprintf("ok: %d claims, 0 over-allocations, 0 misaligned, fullest NUMA node %.0f%%; on a broken copy: %d over-allocations, %d misaligned",
		v.Claims, 100*v.Fullest, len(bv.OverAllocated), len(bv.Misaligned)), nil
}
