package dra

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// sliceCases are node shapes with their configs: the slices must describe
// each exactly.
var sliceCases = []struct {
	name, fixture, config string
}{
	{"384 CPUs, 8 NUMA nodes: 3 slices", "epyc-2s-384", `
isolatedCPUs: "4-191,196-383"
pools: {shared: {count: 8}}
`},
	{"Xeon 2 sockets, interleaved, with exclusive-non-isolcpus", "xeon-2s-interleaved", `
reservedCPUs: "0,40"
pools:
  exclusive: {count: 60}
  shared: {count: 8}
  exclusive-non-isolcpus: {enabled: true}
`},
	{"Xeon SNC2: 4 NUMA nodes", "xeon-2s-snc2", `isolatedCPUs: "2-39,42-79"`},
	{"EPYC NPS4, one socket", "epyc-1s-nps4", `isolatedCPUs: "8-63,72-127"`},
	{"offline CPUs are not offered", "server-offline-isolcpus", ``},
	{"no isolated CPUs, only exclusive-non-isolcpus", "vm-2cpu", `pools: {exclusive-non-isolcpus: {enabled: true}}`},
	{"no exclusive pool at all: one empty slice", "vm-2cpu", ``},
}

// TestSlicesDescribeThePools checks, on each shape, that the slices offer
// exactly the exclusive pools' CPUs of each NUMA node (exclusive-non-
// isolcpus less what infra must keep), with the documented attributes,
// valid names and at most 128 devices a slice.
func TestSlicesDescribeThePools(t *testing.T) {
	for _, tc := range sliceCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, model := range Models() {
				t.Run(model, func(t *testing.T) { checkSlices(t, static(t, tc.fixture, tc.config), model) })
			}
		})
	}
}

func checkSlices(t *testing.T, s *Static, model string) {
	topo, layout := s.Layout()
	res := Resources(testNode, model, Offer(topo, layout, nil))
	require.Len(t, res.Pools, 1)
	pool, ok := res.Pools[testNode]
	require.True(t, ok, "the pool is named after the node")
	require.NotEmpty(t, pool.Slices)

	// What the slices say, counted by pool and node.
	got := map[string]map[int]int{}
	names := map[string]bool{}
	total := 0
	for _, sl := range pool.Slices {
		assert.LessOrEqual(t, len(sl.Devices), resourceapi.ResourceSliceMaxDevices)
		for _, dev := range sl.Devices {
			assert.Empty(t, validation.IsDNS1123Label(dev.Name), "device name %q", dev.Name)
			for name := range dev.Attributes {
				checkQualifiedName(t, string(name))
			}
			for name := range dev.Capacity {
				checkQualifiedName(t, string(name))
			}
			assert.LessOrEqual(t, len(dev.Attributes)+len(dev.Capacity), resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice, "device %s", dev.Name)
			assert.False(t, names[dev.Name], "duplicate device %s", dev.Name)
			names[dev.Name] = true
			p, numa, slot, err := ParseDeviceName(dev.Name)
			require.NoError(t, err)
			assert.Equal(t, model, *dev.Attributes[AttrModel].StringValue)
			n := 1
			if model == ModelCPU {
				assert.True(t, slot)
				assert.Empty(t, dev.Capacity)
				assert.Nil(t, dev.AllowMultipleAllocations)
			} else {
				assert.False(t, slot)
				assert.True(t, *dev.AllowMultipleAllocations, "claims share it")
				c := dev.Capacity[CapacityCPUs]
				n = int(c.Value.Value())
				assert.Equal(t, "1", c.RequestPolicy.Default.String())
				checkRequestPolicy(t, c)
			}
			total += n
			assert.Equal(t, p, *dev.Attributes[AttrPool].StringValue)
			assert.Equal(t, int64(numa), *dev.Attributes[AttrNUMANode].IntValue)
			node, ok := topo.NUMANode(numa)
			require.True(t, ok)
			socket, _ := topo.CPU(node.CPUs.List()[0])
			assert.Equal(t, int64(socket.Socket), *dev.Attributes[AttrSocket].IntValue)
			assert.LessOrEqual(t, len(dev.Attributes)+len(dev.Capacity), resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
			if got[p] == nil {
				got[p] = map[int]int{}
			}
			got[p][numa] += n
		}
	}

	// What the pools are.
	want := map[string]map[int]int{}
	wantTotal := 0
	for _, p := range []string{pools.Exclusive, pools.ExclusiveNonIsolcpus} {
		cpus := layout.Pool(p)
		for _, n := range topo.NUMANodes {
			if c := cpus.Intersection(n.CPUs).Intersection(topo.Online).Size(); c > 0 {
				if want[p] == nil {
					want[p] = map[int]int{}
				}
				want[p][n.ID] = c
				wantTotal += c
			}
		}
	}
	if eni := layout.ExclusiveNonIsolcpus; !eni.IsEmpty() {
		// Infra keeps minInfraCPUs: what its reserved CPUs do not
		// cover is taken from the highest node.
		deficit := layout.MinInfraCPUs - (layout.Infra.Size() - eni.Size())
		nodes := want[pools.ExclusiveNonIsolcpus]
		for n := len(topo.NUMANodes) - 1; n >= 0 && deficit > 0; n-- {
			d := min(deficit, nodes[n])
			nodes[n] -= d
			deficit -= d
			wantTotal -= d
			if nodes[n] == 0 {
				delete(nodes, n)
			}
		}
	}
	assert.Equal(t, want, got)
	assert.Equal(t, wantTotal, total)
	wantSlices := max(1, (len(names)+resourceapi.ResourceSliceMaxDevices-1)/resourceapi.ResourceSliceMaxDevices)
	assert.Len(t, pool.Slices, wantSlices)
}

// The 384-CPU node needs three slices: devices are not lost or repeated at
// the 128-device boundaries, and the nodes come in order.
func TestSlicesSplitAt128Devices(t *testing.T) {
	s := static(t, "epyc-2s-384", `isolatedCPUs: "4-191,196-383"`)
	topo, layout := s.Layout()
	res := Resources(testNode, ModelCPU, Offer(topo, layout, nil))
	sl := res.Pools[testNode].Slices
	require.Len(t, sl, 3)
	assert.Len(t, sl[0].Devices, 128)
	assert.Len(t, sl[1].Devices, 128)
	assert.Len(t, sl[2].Devices, 376-256)
	assert.Equal(t, "exclusive-numa0-0", sl[0].Devices[0].Name)
	assert.Equal(t, "exclusive-numa7-47", sl[2].Devices[len(sl[2].Devices)-1].Name) // node 0 has the 8 CPUs that are not isolated

	// One device per node in the other model.
	grouped := Resources(testNode, ModelNUMANode, Offer(topo, layout, nil)).Pools[testNode].Slices
	require.Len(t, grouped, 1)
	require.Len(t, grouped[0].Devices, 8)
	assert.Equal(t, "exclusive-numa0", grouped[0].Devices[0].Name)
	capa := grouped[0].Devices[0].Capacity[CapacityCPUs]
	assert.Equal(t, int64(40), capa.Value.Value())
}

// CPUs that containers hold without a claim are not offered: the
// scheduler must not count them.
func TestOfferLeavesOutCPUsHeldOutsideClaims(t *testing.T) {
	s := static(t, "xeon-2s-interleaved", `reservedCPUs: "0,40"
pools: {exclusive: {count: 60}}`)
	topo, layout := s.Layout()
	full := Offer(topo, layout, nil)
	// Two CPUs of node 1 (odd ids) held by an exclusive container from
	// before the driver was on.
	held := layout.Exclusive.Intersection(topo.CPUsWhere(func(c sysfs.CPU) bool { return c.NUMA == 1 })).List()[:2]
	less := Offer(topo, layout, map[string]cpuset.CPUSet{pools.Exclusive: cpuset.New(held...)})
	require.Len(t, less, 2)
	assert.Equal(t, full[0], less[0])
	assert.Equal(t, full[1].Slots-2, less[1].Slots)
}

// exclusive-non-isolcpus leaves infra its minInfraCPUs: with no reserved
// CPUs, the last minInfraCPUs lendable CPUs are not offered.
func TestOfferKeepsInfraMinimum(t *testing.T) {
	s := static(t, "xeon-2s-snc2", `pools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 6}}`)
	topo, layout := s.Layout()
	groups := Offer(topo, layout, nil)
	total := 0
	for _, g := range groups {
		require.Equal(t, pools.ExclusiveNonIsolcpus, g.Pool)
		total += g.Slots
	}
	assert.Equal(t, topo.Online.Size()-6, total)
	assert.Equal(t, 20-6, groups[3].Slots, "taken from the highest node")

	// Reserved CPUs stay in infra anyway: they count toward the minimum.
	s = static(t, "xeon-2s-snc2", `reservedCPUs: "0-3"
pools: {exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 6}}`)
	topo, layout = s.Layout()
	total = 0
	for _, g := range Offer(topo, layout, nil) {
		total += g.Slots
	}
	assert.Equal(t, topo.Online.Size()-6, total)
}

func TestParseDeviceName(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool string
		numa int
		slot int // -1: a ModelNUMANode device
	}{
		{"exclusive-numa0-0", pools.Exclusive, 0, 0},
		{"exclusive-numa12-127", pools.Exclusive, 12, 127},
		{"exclusive-non-isolcpus-numa1-3", pools.ExclusiveNonIsolcpus, 1, 3},
		{"exclusive-nonuma-5", pools.Exclusive, sysfs.Unknown, 5},
		{"exclusive-numa0", pools.Exclusive, 0, -1},
		{"exclusive-non-isolcpus-numa3", pools.ExclusiveNonIsolcpus, 3, -1},
		{"exclusive-nonuma", pools.Exclusive, sysfs.Unknown, -1},
	} {
		pool, numa, slot, err := ParseDeviceName(tc.name)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.pool, pool, tc.name)
		assert.Equal(t, tc.numa, numa, tc.name)
		assert.Equal(t, tc.slot >= 0, slot, tc.name)
		if slot {
			assert.Equal(t, tc.name, SlotName(pool, numa, tc.slot))
		} else {
			assert.Equal(t, tc.name, GroupName(pool, numa))
		}
	}
	for _, bad := range []string{"", "exclusive", "shared-numa0-1", "infra-numa0", "exclusive-numa-1-2", "exclusive-numa01-2",
		"exclusive-numa0-01", "exclusive-numa0-x", "exclusive-node0-1", "gpu-0", "exclusive-numa99999999999999999999-1",
		"exclusive-numa0-99999999999999999999", "exclusive-numa0-", "-numa0"} {
		_, _, _, err := ParseDeviceName(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// checkRequestPolicy applies the API server's rules for a capacity's
// request policy (k8s.io/kubernetes pkg/apis/resource/validation, which
// the fake clientset does not run): the default within the range or among
// the valid values, min + step within the capacity, and whole CPUs.
func checkRequestPolicy(t *testing.T, c resourceapi.DeviceCapacity) {
	t.Helper()
	p := c.RequestPolicy
	require.NotNil(t, p.Default)
	require.True(t, (p.ValidRange == nil) != (len(p.ValidValues) == 0), "one of validRange and validValues")
	if r := p.ValidRange; r != nil {
		sum := r.Min.DeepCopy()
		sum.Add(*r.Step)
		assert.LessOrEqual(t, sum.Cmp(c.Value), 0, "min %s + step %s within the capacity %s", r.Min, r.Step, c.Value.String())
		assert.Equal(t, "1", r.Step.String(), "whole CPUs")
		assert.GreaterOrEqual(t, p.Default.Cmp(*r.Min), 0)
	} else {
		assert.Contains(t, p.ValidValues, *p.Default)
		for _, v := range p.ValidValues {
			assert.LessOrEqual(t, v.Cmp(c.Value), 0)
		}
	}
}

// A pool with one CPU on a NUMA node: the API server refused the policy
// of min 1 + step 1 above a capacity of 1 (found on the cluster suite).
func TestOneCPUDevicePolicy(t *testing.T) {
	res := Resources(testNode, ModelNUMANode, []Group{{Pool: pools.Exclusive, NUMA: 0, Socket: 0, Slots: 1}, {Pool: pools.Exclusive, NUMA: 1, Socket: 0, Slots: 2}})
	devices := res.Pools[testNode].Slices[0].Devices
	require.Len(t, devices, 2)
	for _, dev := range devices {
		checkRequestPolicy(t, dev.Capacity[CapacityCPUs])
	}
}

// checkQualifiedName: an attribute's or a capacity's name is within the
// API's lengths (<domain>/<ID>), which validation would refuse the slice
// for.
func checkQualifiedName(t *testing.T, name string) {
	t.Helper()
	domain, id, found := strings.Cut(name, "/")
	if !found {
		domain, id = "", name
	}
	assert.LessOrEqual(t, len(domain), resourceapi.DeviceMaxDomainLength, "%s", name)
	assert.LessOrEqual(t, len(id), resourceapi.DeviceMaxIDLength, "%s", name)
}
