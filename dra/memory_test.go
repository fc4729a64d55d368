package dra

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// xeonConfig is testdata/configs/xeon.yaml: both exclusive pools on both
// NUMA nodes.
const xeonConfig = `reservedCPUs: "0,40"
pools:
  exclusive: {count: 60}
  shared: {count: 8}
  exclusive-non-isolcpus: {enabled: true}`

// topologyWithHugePages discovers a named fixture with hugepages reserved
// (and used) as given.
func topologyWithHugePages(tb testing.TB, name string, hp ...fixture.HugePageSpec) (*sysfs.Topology, string) {
	tb.Helper()
	dir, err := fixture.SpecDir()
	require.NoError(tb, err)
	spec, err := fixture.LoadSpec(filepath.Join(dir, name+".yaml"))
	require.NoError(tb, err)
	spec.HugePages = hp
	root := tb.TempDir()
	require.NoError(tb, spec.Write(root))
	t, err := sysfs.Discover(root)
	require.NoError(tb, err)
	return t, root
}

// hugeXeon is the Xeon with 512 2 MiB pages (1 GiB) and two 1 GiB pages on
// NUMA node 1 only, used pages as given.
func hugeXeon(t *testing.T, used2M int64, cfg string) *Static {
	t.Helper()
	topo, _ := topologyWithHugePages(t, "xeon-2s-interleaved",
		fixture.HugePageSpec{Node: 1, SizeKB: 2048, Count: 512, Used: used2M},
		fixture.HugePageSpec{Node: 1, SizeKB: 1 << 20, Count: 2})
	s, err := NewStatic(topo, parseConfig(t, cfg))
	require.NoError(t, err)
	return s
}

func devicesByName(res []resourceapi.Device) map[string]resourceapi.Device {
	out := map[string]resourceapi.Device{}
	for _, d := range res {
		out[d.Name] = d
	}
	return out
}

// Each NUMA node's memory and hugepages are capacities of one device, the
// exclusive pool's: the exclusive-non-isolcpus device of the same node
// carries none, so the scheduler never counts the same bytes twice. A
// request that names no memory consumes none; hugepages go by pages.
func TestSlicesCarryEachNodesMemoryOnce(t *testing.T) {
	// CPU 0 not reserved: infra's CPUs that are neither reserved nor
	// isolated, the only ones lent, are then on both nodes (0 and 1, 41).
	cfg := strings.Replace(xeonConfig, `reservedCPUs: "0,40"`, `reservedCPUs: "40"`, 1)
	s := hugeXeon(t, 0, cfg+"\nmemory: {reservedPerNode: 2Gi, reservedHugePagesPerNode: {2Mi: 12}}")
	topo, layout := s.Layout()
	res := Resources(testNode, ModelNUMANode, WithMemory(Offer(topo, layout, nil), s.MemoryOffer()))
	devs := devicesByName(res.Pools[testNode].Slices[0].Devices)
	require.Len(t, devs, 4)
	for _, name := range []string{"exclusive-non-isolcpus-numa0", "exclusive-non-isolcpus-numa1"} {
		assert.Equal(t, []resourceapi.QualifiedName{CapacityCPUs}, capNames(devs[name]), name)
	}
	for _, name := range []string{"exclusive-numa0", "exclusive-numa1"} {
		assert.Equal(t, []resourceapi.QualifiedName{CapacityCPUs, "cpupool.dev/hugepages1Gi", "cpupool.dev/hugepages2Mi", CapacityMemory}, capNames(devs[name]), name)
		for capName, c := range devs[name].Capacity {
			checkMemoryPolicy(t, capName, c)
		}
	}
	n1 := devs["exclusive-numa1"].Capacity
	assert.Equal(t, "1000Mi", ptr.To(n1["cpupool.dev/hugepages2Mi"].Value).String(), "512 pages less the 12 of the host")
	assert.Equal(t, "2Gi", ptr.To(n1["cpupool.dev/hugepages1Gi"].Value).String())
	assert.Equal(t, "59Gi", ptr.To(n1[CapacityMemory].Value).String(), "64Gi less 3Gi of hugepages and 2Gi of reserve")
	n0 := devs["exclusive-numa0"].Capacity
	assert.Equal(t, "0", ptr.To(n0["cpupool.dev/hugepages2Mi"].Value).String())
	assert.Equal(t, "62Gi", ptr.To(n0[CapacityMemory].Value).String())

	// The cpu model's devices are single slots: no memory.
	for _, d := range Resources(testNode, ModelCPU, WithMemory(Offer(topo, layout, nil), s.MemoryOffer())).Pools[testNode].Slices[0].Devices {
		require.Equal(t, []resourceapi.QualifiedName(nil), capNames(d))
	}
}

func capNames(d resourceapi.Device) []resourceapi.QualifiedName {
	var out []resourceapi.QualifiedName
	for n := range d.Capacity {
		out = append(out, n)
	}
	if out == nil {
		return nil
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// checkMemoryPolicy checks a memory capacity's policy by the API server's
// rules (k8s.io/kubernetes pkg/apis/resource/validation,
// validateRequestPolicy): a default of 0 that the policy admits, min +
// step within the capacity, and hugepages in whole pages.
func checkMemoryPolicy(t *testing.T, name resourceapi.QualifiedName, c resourceapi.DeviceCapacity) {
	t.Helper()
	if name == CapacityCPUs {
		return
	}
	p := c.RequestPolicy
	require.NotNil(t, p, name)
	require.NotNil(t, p.Default, name)
	assert.True(t, p.Default.IsZero(), "%s: a request that names no memory consumes none", name)
	if r := p.ValidRange; r != nil {
		require.NotNil(t, r.Min)
		assert.LessOrEqual(t, r.Min.Cmp(c.Value), 0)
		if r.Step != nil {
			sum := r.Min.DeepCopy()
			sum.Add(*r.Step)
			assert.LessOrEqual(t, sum.Cmp(c.Value), 0, "%s: min + step within the capacity", name)
			size, ok := hugePagesCapacitySize(name)
			require.True(t, ok)
			assert.Equal(t, size*1024, r.Step.Value(), "%s: whole pages", name)
		}
	}
	if len(p.ValidValues) > 0 {
		assert.Nil(t, p.ValidRange)
		assert.Contains(t, p.ValidValues, *p.Default)
	}
}

// hugePagesRequest asks for cpus CPUs and hugepages of the 2 MiB size.
func hugePagesRequest(r resourceapi.DeviceRequest, cpus int64, pages string) resourceapi.DeviceRequest {
	r = capacity(r, cpus)
	r.Exactly.Capacity.Requests["cpupool.dev/hugepages2Mi"] = resource.MustParse(pages)
	return r
}

// The scheduler puts a claim for CPUs and hugepages on the NUMA node that
// has them, with or without a NIC to align with; a claim for more than any
// node has is not allocated. Prepare records and reserves what was
// allocated, Unprepare gives it back.
func TestSchedulerPutsHugePagesWhereTheyAre(t *testing.T) {
	s := hugeXeon(t, 0, xeonConfig)
	cls := shippedClasses(t)
	nics := published(nicDriver, map[string][]resourceapi.Device{testNode: {nicOn("eth0", 0), nicOn("eth1", 1)}})
	sl := append(ourSlices(t, s, ModelNUMANode, nil), nics...)

	claim := claimFor("uid-1", nil, hugePagesRequest(request("cpus", "cpupool-exclusive", 1), 4, "64Mi"))
	res := schedule(t, cls, sl, claim)
	require.Len(t, res, 1)
	assert.Equal(t, []int{1}, nodesOf(t, res[0]), "node 0, first in order, has no hugepages")
	consumed := res[0].Devices.Results[0].ConsumedCapacity
	assert.Equal(t, "64Mi", ptr.To(consumed["cpupool.dev/hugepages2Mi"]).String())
	assert.True(t, ptr.To(consumed[CapacityMemory]).IsZero(), "no memory named, none consumed")

	withNIC := claimFor("uid-2", sameNUMANode, request("nic", "nic", 1), hugePagesRequest(request("cpus", "cpupool-exclusive", 1), 4, "3Mi"))
	res2 := schedule(t, cls, sl, withNIC)
	require.Len(t, res2, 1)
	assert.Equal(t, []int{1}, nodesOf(t, res2[0]))
	assert.Equal(t, "4Mi", ptr.To(res2[0].Devices.Results[1].ConsumedCapacity["cpupool.dev/hugepages2Mi"]).String(), "whole pages")

	assert.Empty(t, schedule(t, cls, sl, claimFor("uid-3", nil, hugePagesRequest(request("cpus", "cpupool-exclusive", 1), 4, "2Gi"))), "more than any node has")
	nonIso := claimFor("uid-4", nil, hugePagesRequest(request("cpus", "cpupool-exclusive-non-isolcpus", 1), 1, "2Mi"))
	assert.Empty(t, schedule(t, cls, sl, nonIso), "node 1's memory is on the exclusive pool's device")

	d := newTestDriver(t, s)
	require.NoError(t, prepare(t, d.Driver, withAllocation(claim, res[0], "pod-1"))["uid-1"].Err)
	r := d.Claims()["uid-1"].Requests["cpus"]
	assert.Equal(t, []NodeMemory{{Node: 1, HugePages: map[int64]int64{2048: 32}}}, r.Memory)
	assert.Equal(t, map[string]numamem.ClaimMemory{"uid-1/cpus": {Key: "uid-1/cpus", Held: []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: 2048, Count: 32}}}}}},
		s.Allocator().ClaimReservations())
	assert.Equal(t, []numamem.NodeMemoryUse{{Node: 1, HugePages: map[int64]int64{2048: 32}}}, s.Allocator().MemoryUse())
	assert.Equal(t, "1Gi", offered(t, d.Driver, "exclusive-numa1", "cpupool.dev/hugepages2Mi"), "the scheduler counts the claim: the offer stays")

	// The restarted driver reserves it again.
	s2 := dracore.StaticOf(allocator.New(s.Allocator().Topology(), s.Allocator().Layout(), true), config.Allocation{})
	td2 := &testDriver{pools: s2, claims: d.claims, cdi: d.cdi}
	td2.Driver = td2.restart(t)
	assert.Equal(t, s.Allocator().ClaimReservations(), s2.Allocator().ClaimReservations())

	unprepare(t, d.Driver, "uid-1")
	assert.Empty(t, s.Allocator().ClaimReservations())
	assert.Empty(t, s.Allocator().MemoryUse())
}

// offered is a capacity of a device the driver publishes now.
func offered(t *testing.T, d *Driver, device string, name resourceapi.QualifiedName) string {
	t.Helper()
	dev, ok := devicesByName(d.Resources().Pools[testNode].Slices[0].Devices)[device]
	require.True(t, ok, device)
	return ptr.To(dev.Capacity[name].Value).String()
}

// hugePagesClaim is a claim as the scheduler leaves it: cpus CPUs and n
// 2 MiB pages of the exclusive pool's device on a NUMA node.
func hugePagesClaim(uid string, numa, cpus int, pages int64, pods ...string) *resourceapi.ResourceClaim {
	c := shareClaim(uid, "claim-"+uid, pools.Exclusive, numa, cpus, pods...)
	c.Status.Allocation.Devices.Results[0].ConsumedCapacity["cpupool.dev/hugepages2Mi"] = *resource.NewQuantity(pages*2<<20, resource.BinarySI)
	return c
}

// A Prepare whose hugepages the node no longer has (taken by something
// the plugin does not know since the slices were published) fails with
// what each node has, and reserves nothing; the kubelet retries.
func TestPrepareFailsWhenTheHugePagesAreGone(t *testing.T) {
	s := hugeXeon(t, 512, xeonConfig)
	d := newTestDriver(t, s)
	res := prepare(t, d.Driver, hugePagesClaim("uid-1", 1, 2, 16, "pod-1"))["uid-1"]
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "hugepages-2Mi: asked 16, free node1 0")
	assert.Empty(t, d.Claims())
	assert.Empty(t, s.Allocator().ClaimReservations())
	assert.Equal(t, "0", offered(t, d.Driver, "exclusive-numa1", "cpupool.dev/hugepages2Mi"), "pages others took are not offered")

	// Two claims that each fit but not together: the second fails.
	s = hugeXeon(t, 0, xeonConfig)
	d = newTestDriver(t, s)
	require.NoError(t, prepare(t, d.Driver, hugePagesClaim("uid-1", 1, 2, 300, "pod-1"))["uid-1"].Err)
	res = prepare(t, d.Driver, hugePagesClaim("uid-2", 1, 2, 300, "pod-2"))["uid-2"]
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "hugepages-2Mi: asked 300, free node1 212")
	assert.Len(t, s.Allocator().ClaimReservations(), 1)
}

// A claims file of a version before memory was reserved loads: its
// requests reserve nothing.
func TestOldClaimsFileLoads(t *testing.T) {
	s := hugeXeon(t, 0, xeonConfig)
	d := newTestDriver(t, s)
	require.NoError(t, os.MkdirAll(filepath.Dir(d.claims), 0o755))
	old := `{"version":1,"claims":{"uid-1":{"namespace":"ns","name":"c","pods":["p"],"requests":{"cpus":{"pool":"exclusive","slots":{"1":2},"cpus":"3,5","token":"abc"}}}}}`
	require.NoError(t, os.WriteFile(d.claims, []byte(old), 0o644))
	d2 := d.restart(t)
	require.Contains(t, d2.Claims(), "uid-1")
	assert.Empty(t, d2.Claims()["uid-1"].Requests["cpus"].Memory)
	assert.Empty(t, s.Allocator().ClaimReservations())
	// And the same claim prepared again is the same allocation.
	c := shareClaim("uid-1", "c", pools.Exclusive, 1, 2, "p")
	require.NoError(t, prepare(t, d2, c)[types.UID("uid-1")].Err)
	assert.Equal(t, "3,5", d2.Claims()["uid-1"].Requests["cpus"].CPUs)
	assert.False(t, strings.Contains(string(must(os.ReadFile(d.claims))), `"memory"`))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A request given two shares on one node (memory on one, pages on the
// other) adds them up.
func TestAllocatedAddsMemoryOfOneNode(t *testing.T) {
	s := hugeXeon(t, 0, xeonConfig)
	d := newTestDriver(t, s)
	c := shareClaim("uid-1", "c", pools.Exclusive, 1, 1, "p")
	first := c.Status.Allocation.Devices.Results[0]
	first.ConsumedCapacity[CapacityMemory] = resource.MustParse("1Gi")
	second := *first.DeepCopy()
	second.ShareID = ptr.To(types.UID("share-2"))
	second.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{CapacityCPUs: resource.MustParse("1"), "cpupool.dev/hugepages2Mi": resource.MustParse("4Mi")}
	c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{first, second}
	w, err := d.allocated(c)
	require.NoError(t, err)
	assert.Equal(t, []NodeMemory{{Node: 1, Memory: 1 << 30, HugePages: map[int64]int64{2048: 2}}}, w["cpus"].memoryList())
	assert.Equal(t, map[int]int{1: 2}, w["cpus"].slots)
}

// TestMemoryStaysWhereClaimsHoldIt: a node's memory is on the device its
// prepared claims were allocated it on, whatever the layout's rule says
// now (issue 41, item 10); when that device is not offered (its pool has no
// CPU online there) the node's memory is offered on no device; other nodes
// follow the rule.
func TestMemoryStaysWhereClaimsHoldIt(t *testing.T) {
	s := hugeXeon(t, 0, xeonConfig)
	topo, layout := s.Layout()
	carrier := func(groups []Group) map[int]string {
		out := map[int]string{}
		for _, g := range groups {
			if g.Memory != nil {
				out[g.NUMA] = GroupName(g.Pool, g.NUMA)
			}
		}
		return out
	}
	assert.Equal(t, map[int]string{0: "exclusive-numa0", 1: "exclusive-numa1"}, carrier(WithMemoryHeld(Offer(topo, layout, nil), s.MemoryOffer(), nil)))
	assert.Equal(t, map[int]string{0: "exclusive-numa0", 1: "exclusive-non-isolcpus-numa1"},
		carrier(WithMemoryHeld(Offer(topo, layout, nil), s.MemoryOffer(), map[int]string{1: pools.ExclusiveNonIsolcpus})))

	// The exclusive pool's CPUs of node 1 went offline.
	off := *layout
	off.Exclusive = layout.Exclusive.Difference(topo.NUMANodes[1].CPUs)
	assert.Equal(t, map[int]string{0: "exclusive-numa0"},
		carrier(WithMemoryHeld(Offer(topo, &off, nil), s.MemoryOffer(), map[int]string{1: pools.Exclusive})), "not moved to exclusive-non-isolcpus-numa1")
	assert.Equal(t, map[int]string{0: "exclusive-numa0", 1: "exclusive-non-isolcpus-numa1"},
		carrier(WithMemory(Offer(topo, &off, nil), s.MemoryOffer())), "no claim holds any: the rule")
}
