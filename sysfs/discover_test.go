package sysfs_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

func TestDiscoverFixtures(t *testing.T) {
	type cpuFact struct {
		id, socket, numa int
		siblings         string
		l3CPUsWith       int // another CPU expected in the same L3 group, -1 for none
		baseFreqKHz      int64
	}
	type discoveryCase struct {
		fixture        string
		online         string
		offline        string
		isolated       string
		isolatedSource string
		sockets        int
		numaNodes      int
		l3Groups       int
		cores          int
		smtActive      bool
		cpus           []cpuFact
	}
	tests := []discoveryCase{
		{fixture: "vm-2cpu", online: "0-1", sockets: 1, numaNodes: 1, l3Groups: 1, cores: 2,
			cpus: []cpuFact{{id: 1, socket: 0, numa: 0, siblings: "1", l3CPUsWith: 0}}},
		{fixture: "vm-2numa-hugepages", online: "0-3", sockets: 2, numaNodes: 2, l3Groups: 2, cores: 4,
			cpus: []cpuFact{{id: 2, socket: 1, numa: 1, siblings: "2", l3CPUsWith: 3}}},
		{fixture: "desktop-8c16t", online: "0-15", sockets: 1, numaNodes: 1, l3Groups: 1, cores: 8, smtActive: true,
			cpus: []cpuFact{{id: 3, socket: 0, numa: 0, siblings: "3,11", l3CPUsWith: 12, baseFreqKHz: 3600000}}},
		{fixture: "xeon-2s-interleaved", online: "0-79", isolated: "2-39,42-79", isolatedSource: "sysfs",
			sockets: 2, numaNodes: 2, l3Groups: 2, cores: 40, smtActive: true,
			cpus: []cpuFact{
				{id: 0, socket: 0, numa: 0, siblings: "0,40", l3CPUsWith: 2},
				{id: 1, socket: 1, numa: 1, siblings: "1,41", l3CPUsWith: 3},
				{id: 41, socket: 1, numa: 1, siblings: "1,41", l3CPUsWith: 79},
			}},
		// xeon-2s-interleaved with 2 MiB pages reserved on node 1 (the DRA
		// memory section of the Kubernetes suite): the CPUs read the same.
		{fixture: "xeon-2s-hugepages", online: "0-79", isolated: "2-39,42-79", isolatedSource: "sysfs",
			sockets: 2, numaNodes: 2, l3Groups: 2, cores: 40, smtActive: true,
			cpus: []cpuFact{{id: 1, socket: 1, numa: 1, siblings: "1,41", l3CPUsWith: 3}}},
		{fixture: "xeon-2s-snc2", online: "0-79", sockets: 2, numaNodes: 4, l3Groups: 2, cores: 40, smtActive: true,
			cpus: []cpuFact{
				{id: 0, socket: 0, numa: 0, siblings: "0,40", l3CPUsWith: 38, baseFreqKHz: 2100000},
				{id: 2, socket: 0, numa: 0, siblings: "2,42", l3CPUsWith: 0, baseFreqKHz: 2700000},
				{id: 20, socket: 0, numa: 1, siblings: "20,60", l3CPUsWith: 0},
				{id: 21, socket: 1, numa: 3, siblings: "21,61", l3CPUsWith: 1},
			}},
		{fixture: "epyc-1s-nps4", online: "0-127", sockets: 1, numaNodes: 4, l3Groups: 8, cores: 64, smtActive: true,
			cpus: []cpuFact{
				{id: 0, socket: 0, numa: 0, siblings: "0,64", l3CPUsWith: 71},
				{id: 8, socket: 0, numa: 0, siblings: "8,72", l3CPUsWith: 15},
				{id: 16, socket: 0, numa: 1, siblings: "16,80", l3CPUsWith: 23},
			}},
		{fixture: "epyc-2s-384", online: "0-383", sockets: 2, numaNodes: 8, l3Groups: 24, cores: 192, smtActive: true,
			cpus: []cpuFact{
				{id: 95, socket: 0, numa: 3, siblings: "95,287", l3CPUsWith: 88},
				{id: 96, socket: 1, numa: 4, siblings: "96,288", l3CPUsWith: 103},
			}},
		{fixture: "epyc-2s-nps0", online: "0-127", sockets: 2, numaNodes: 1, l3Groups: 8, cores: 64, smtActive: true,
			cpus: []cpuFact{
				{id: 32, socket: 1, numa: 0, siblings: "32,96", l3CPUsWith: 39},
				{id: 64, socket: 0, numa: 0, siblings: "0,64", l3CPUsWith: 7},
			}},
		// The big and sparse shapes (issue 33).
		{fixture: "xeon-2s-gnr-snc3", online: "0-479", sockets: 2, numaNodes: 6, l3Groups: 2, cores: 240, smtActive: true,
			cpus: []cpuFact{
				{id: 40, socket: 0, numa: 1, siblings: "40,280", l3CPUsWith: 0},
				{id: 479, socket: 1, numa: 5, siblings: "239,479", l3CPUsWith: 120},
			}},
		{fixture: "epyc-2s-turin-nps4", online: "0-767", sockets: 2, numaNodes: 8, l3Groups: 24, cores: 384, smtActive: true,
			cpus: []cpuFact{
				{id: 15, socket: 0, numa: 0, siblings: "15,399", l3CPUsWith: 0},
				{id: 400, socket: 0, numa: 0, siblings: "16,400", l3CPUsWith: 31},
				{id: 767, socket: 1, numa: 7, siblings: "383,767", l3CPUsWith: 368},
			}},
		{fixture: "epyc-2s-1024", online: "0-1023", sockets: 2, numaNodes: 4, l3Groups: 16, cores: 512, smtActive: true,
			cpus: []cpuFact{
				{id: 1023, socket: 1, numa: 3, siblings: "511,1023", l3CPUsWith: 480},
				{id: 512, socket: 0, numa: 0, siblings: "0,512", l3CPUsWith: 31},
			}},
		{fixture: "sparse-4096", online: "0-47,1024-1029,1031-1055,2032-2049,2051-2095,3072-3077,3079-3103,4080-4094",
			offline: "1030,2050,3078,4095", sockets: 2, numaNodes: 2, l3Groups: 12, cores: 95, smtActive: true,
			cpus: []cpuFact{
				{id: 2, numa: 0, siblings: "2", l3CPUsWith: 7},
				{id: 2047, socket: 1, numa: 1, siblings: "2047", l3CPUsWith: 2040},
				{id: 4094, socket: 1, numa: 1, siblings: "2046,4094", l3CPUsWith: 2040},
				{id: 3079, socket: 1, numa: 1, siblings: "1031,3079", l3CPUsWith: 1024},
			}},
		{fixture: "xeon-1s-nosmt", online: "0-15", offline: "16-31", sockets: 1, numaNodes: 1, l3Groups: 1, cores: 16,
			cpus: []cpuFact{{id: 5, socket: 0, numa: 0, siblings: "5", l3CPUsWith: 6}}},
		{fixture: "server-offline-isolcpus", online: "0-6,8-14,16-30", offline: "7,15,31",
			isolated: "2-7,18-23", isolatedSource: "cmdline isolcpus=", sockets: 1, numaNodes: 1, l3Groups: 1, cores: 15, smtActive: true,
			cpus: []cpuFact{
				{id: 23, socket: 0, numa: 0, siblings: "23", l3CPUsWith: 0},
				{id: 2, socket: 0, numa: 0, siblings: "2,18", l3CPUsWith: 0},
			}},
	}
	// The kubelet CPU manager's own test topologies, for comparing placements.
	tests = append(tests, []discoveryCase{
		{fixture: "kubelet-single-socket-ht", online: "0-7", sockets: 1, numaNodes: 1, l3Groups: 1, cores: 4, smtActive: true,
			cpus: []cpuFact{{id: 1, numa: 0, siblings: "1,5", l3CPUsWith: 0}}},
		{fixture: "kubelet-dual-socket-ht", online: "0-11", sockets: 2, numaNodes: 2, l3Groups: 2, cores: 6, smtActive: true,
			cpus: []cpuFact{{id: 0, numa: 0, siblings: "0,6", l3CPUsWith: 2}, {id: 7, socket: 1, numa: 1, siblings: "1,7", l3CPUsWith: 5}}},
		{fixture: "kubelet-dual-socket-multi-numa-ht", online: "0-79", sockets: 2, numaNodes: 4, l3Groups: 2, cores: 40, smtActive: true,
			cpus: []cpuFact{{id: 49, numa: 0, siblings: "9,49", l3CPUsWith: 10}, {id: 50, numa: 1, siblings: "10,50", l3CPUsWith: 0}, {id: 30, socket: 1, numa: 3, siblings: "30,70", l3CPUsWith: 20}}},
		{fixture: "kubelet-dual-socket-no-ht", online: "0-7", sockets: 2, numaNodes: 2, l3Groups: 2, cores: 8,
			cpus: []cpuFact{{id: 3, numa: 0, siblings: "3", l3CPUsWith: 0}, {id: 4, socket: 1, numa: 1, siblings: "4", l3CPUsWith: 7}}},
		{fixture: "kubelet-dual-socket-multi-numa-ht-large", online: "0-255", sockets: 2, numaNodes: 8, l3Groups: 2, cores: 128, smtActive: true,
			cpus: []cpuFact{{id: 143, numa: 0, siblings: "15,143", l3CPUsWith: 63}, {id: 64, socket: 1, numa: 4, siblings: "64,192", l3CPUsWith: 127}}},
		// One NUMA node spans two sockets.
		{fixture: "kubelet-multi-socket-dual-socket-per-numa-ht", online: "0-79", sockets: 4, numaNodes: 2, l3Groups: 4, cores: 40, smtActive: true,
			cpus: []cpuFact{{id: 10, socket: 1, numa: 0, siblings: "10,50", l3CPUsWith: 19}, {id: 59, socket: 1, numa: 0, siblings: "19,59", l3CPUsWith: 10},
				{id: 30, socket: 3, numa: 1, siblings: "30,70", l3CPUsWith: 39}}},
		// Four threads a core, numbered irregularly.
		{fixture: "kubelet-quad-socket-four-way-ht", online: "0-287", sockets: 4, numaNodes: 4, l3Groups: 4, cores: 72, smtActive: true,
			cpus: []cpuFact{{id: 169, numa: 0, siblings: "0,109,169,229", l3CPUsWith: 50}, {id: 37, socket: 3, numa: 3, siblings: "37,108,168,228", l3CPUsWith: 287}}},
		{fixture: "kubelet-uncore-single-socket-no-smt", online: "0-15", sockets: 1, numaNodes: 1, l3Groups: 4, cores: 16,
			cpus: []cpuFact{{id: 7, numa: 0, siblings: "7", l3CPUsWith: 4}}},
		{fixture: "kubelet-uncore-dual-socket-no-smt", online: "0-15", sockets: 2, numaNodes: 2, l3Groups: 4, cores: 16,
			cpus: []cpuFact{{id: 11, socket: 1, numa: 1, siblings: "11", l3CPUsWith: 8}}},
		{fixture: "kubelet-uncore-single-socket-multi-numa", online: "0-15", sockets: 1, numaNodes: 2, l3Groups: 4, cores: 16,
			cpus: []cpuFact{{id: 12, numa: 1, siblings: "12", l3CPUsWith: 15}}},
		{fixture: "kubelet-uncore-single-socket-smt", online: "0-15", sockets: 1, numaNodes: 1, l3Groups: 2, cores: 8, smtActive: true,
			cpus: []cpuFact{{id: 12, numa: 0, siblings: "4,12", l3CPUsWith: 7}}},
		{fixture: "kubelet-dual-socket-smt-uncore", online: "0-383", sockets: 2, numaNodes: 2, l3Groups: 24, cores: 192, smtActive: true,
			cpus: []cpuFact{{id: 96, socket: 1, numa: 1, siblings: "96,288", l3CPUsWith: 103}}},
		{fixture: "kubelet-single-socket-smt-small-uncore", online: "0-127", sockets: 1, numaNodes: 1, l3Groups: 16, cores: 64, smtActive: true,
			cpus: []cpuFact{{id: 66, numa: 0, siblings: "2,66", l3CPUsWith: 3}}},
		{fixture: "kubelet-single-socket-no-smt-small-uncore", online: "0-63", sockets: 1, numaNodes: 1, l3Groups: 16, cores: 64,
			cpus: []cpuFact{{id: 5, numa: 0, siblings: "5", l3CPUsWith: 7}}},
		{fixture: "kubelet-small-dual-socket-no-smt-uncore", online: "0-63", sockets: 2, numaNodes: 2, l3Groups: 8, cores: 64,
			cpus: []cpuFact{{id: 33, socket: 1, numa: 1, siblings: "33", l3CPUsWith: 39}}},
		{fixture: "kubelet-large-single-socket-smt-uncore", online: "0-255", sockets: 1, numaNodes: 1, l3Groups: 16, cores: 128, smtActive: true,
			cpus: []cpuFact{{id: 136, numa: 0, siblings: "8,136", l3CPUsWith: 15}}},
		{fixture: "kubelet-dual-socket-multi-numa-uncore", online: "0-191", sockets: 2, numaNodes: 4, l3Groups: 24, cores: 192,
			cpus: []cpuFact{{id: 48, numa: 1, siblings: "48", l3CPUsWith: 55}, {id: 96, socket: 1, numa: 2, siblings: "96", l3CPUsWith: 103}}},
		{fixture: "kubelet-dual-socket-sub-numa-ht-monolithic-uncore", online: "0-239", sockets: 2, numaNodes: 4, l3Groups: 2, cores: 120, smtActive: true,
			cpus: []cpuFact{{id: 150, numa: 1, siblings: "30,150", l3CPUsWith: 0}, {id: 60, socket: 1, numa: 2, siblings: "60,180", l3CPUsWith: 119}}},
		{fixture: "kubelet-large-single-socket-uncore", online: "0-127", sockets: 1, numaNodes: 1, l3Groups: 16, cores: 128,
			cpus: []cpuFact{{id: 15, numa: 0, siblings: "15", l3CPUsWith: 8}}},
		{fixture: "kubelet-single-socket-uncore", online: "0-63", sockets: 1, numaNodes: 1, l3Groups: 1, cores: 64,
			cpus: []cpuFact{{id: 63, numa: 0, siblings: "63", l3CPUsWith: 0}}},
		{fixture: "kubelet-small-single-socket-no-smt-uncore", online: "0-31", sockets: 1, numaNodes: 1, l3Groups: 4, cores: 32,
			cpus: []cpuFact{{id: 31, numa: 0, siblings: "31", l3CPUsWith: 24}}},
	}...)
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[tc.fixture] = true
		t.Run(tc.fixture, func(t *testing.T) {
			topo, err := sysfs.Discover(fixture.Root(t, tc.fixture))
			require.NoError(t, err)
			assert.Equal(t, tc.online, topo.Online.String(), "online")
			assert.Equal(t, tc.offline, topo.Offline.String(), "offline")
			assert.Equal(t, tc.isolated, topo.Isolated.String(), "isolated")
			assert.Equal(t, tc.isolatedSource, topo.IsolatedSource)
			assert.Len(t, topo.Sockets(), tc.sockets, "sockets")
			assert.Len(t, topo.NUMANodes, tc.numaNodes, "NUMA nodes")
			assert.Len(t, topo.L3Groups(), tc.l3Groups, "L3 groups")
			assert.Equal(t, tc.cores, topo.Cores(), "cores")
			assert.Equal(t, tc.smtActive, topo.SMTActive, "SMT active")
			for _, want := range tc.cpus {
				c, ok := topo.CPU(want.id)
				require.True(t, ok, "CPU %d", want.id)
				assert.Equal(t, want.socket, c.Socket, "CPU %d socket", want.id)
				assert.Equal(t, want.numa, c.NUMA, "CPU %d NUMA", want.id)
				assert.Equal(t, want.siblings, c.Siblings.String(), "CPU %d siblings", want.id)
				other, _ := topo.CPU(want.l3CPUsWith)
				assert.Equal(t, c.L3, other.L3, "CPUs %d and %d share an L3", want.id, want.l3CPUsWith)
				if want.baseFreqKHz != 0 {
					assert.Equal(t, want.baseFreqKHz, c.BaseFreqKHz, "CPU %d base frequency", want.id)
				}
			}
			// Invariants every topology must hold.
			// The cache groups are the kernel's lists: one group per
			// distinct list, numbered in order of its lowest CPU (what
			// WithRemembered numbers too when it puts no CPU back).
			for level, of := range map[string]func(sysfs.CPU) (cpuset.CPUSet, int){
				"L2": func(c sysfs.CPU) (cpuset.CPUSet, int) { return c.L2Cache.SharedCPUs, c.L2 },
				"L3": func(c sysfs.CPU) (cpuset.CPUSet, int) { return c.L3Cache.SharedCPUs, c.L3 },
			} {
				want, got := map[int]int{}, map[int]int{}
				byList := map[string]int{}
				for _, c := range topo.CPUs {
					list, index := of(c)
					if index != sysfs.Unknown {
						got[c.ID] = index
					}
					if list.IsEmpty() {
						continue
					}
					v, ok := byList[list.String()]
					if !ok {
						v = len(byList)
						byList[list.String()] = v
					}
					want[c.ID] = v
				}
				require.NotEmpty(t, want, "%s: no CPU lists a cache", level)
				assert.Equal(t, want, got, "%s groups are not the kernel's lists", level)
			}
			coreOf := map[int]sysfs.CPU{}
			for _, c := range topo.CPUs {
				if !c.Online {
					assert.Equal(t, sysfs.Unknown, c.Core, "offline CPU %d has no core", c.ID)
					continue
				}
				assert.True(t, c.Siblings.Contains(c.ID))
				assert.True(t, c.Siblings.IsSubsetOf(topo.Online), "siblings of %d are online", c.ID)
				for _, s := range c.Siblings.List() {
					sib, _ := topo.CPU(s)
					assert.Equal(t, c.Core, sib.Core, "siblings %d and %d share a core index", c.ID, s)
				}
				if prev, ok := coreOf[c.Core]; ok {
					assert.True(t, prev.Siblings.Contains(c.ID), "core index %d is used by non-siblings %d and %d", c.Core, prev.ID, c.ID)
				}
				coreOf[c.Core] = c
				assert.NotEqual(t, sysfs.Unknown, c.NUMA, "CPU %d has a NUMA node", c.ID)
			}
		})
	}
	for _, name := range fixture.Names(t) {
		assert.True(t, covered[name], "fixture %s has no discovery test", name)
	}
}

func TestDiscoverCaches(t *testing.T) {
	topo, err := sysfs.Discover(fixture.Root(t, "xeon-2s-interleaved"))
	require.NoError(t, err)
	c, _ := topo.CPU(41)
	assert.Equal(t, "1,41", c.L2Cache.SharedCPUs.String(), "L2 per core")
	assert.Equal(t, topo.NUMANodes[1].CPUs.String(), c.L3Cache.SharedCPUs.String(), "L3 per socket")
	assert.Equal(t, 1, c.L3Cache.ID, "the kernel's cache id")
	offline, _ := sysfs.Discover(fixture.Root(t, "xeon-1s-nosmt"))
	c, _ = offline.CPU(20)
	assert.Equal(t, sysfs.Unknown, c.L3Cache.ID, "offline CPUs have no caches")
	assert.True(t, c.L3Cache.SharedCPUs.IsEmpty())
}

// TestCacheIndexWithoutLevelIsSkipped: an index directory without a level
// file (seen on some VMs and ARM firmware) is skipped; the indexes after it
// are still read.
func TestCacheIndexWithoutLevelIsSkipped(t *testing.T) {
	root := fixture.Root(t, "xeon-2s-interleaved")
	cache := filepath.Join(root, "sys/devices/system/cpu/cpu41/cache")
	require.NoError(t, os.Remove(filepath.Join(cache, "index0/level")), "the L1d, listed first")
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	c, _ := topo.CPU(41)
	assert.Equal(t, "1,41", c.L2Cache.SharedCPUs.String(), "L2 still read")
	assert.Equal(t, 1, c.L3Cache.ID, "L3 still read")
	other, _ := topo.CPU(43)
	assert.Equal(t, other.L3, c.L3, "in the same L3 group as its socket")
}

func TestDiscoverXeonDistances(t *testing.T) {
	topo, err := sysfs.Discover(fixture.Root(t, "xeon-2s-snc2"))
	require.NoError(t, err)
	assert.Equal(t, []int{10, 12, 21, 21}, topo.NUMANodes[0].Distance)
	assert.True(t, topo.NUMANodes[3].HasMemory)
	assert.Equal(t, int64(64<<20), topo.NUMANodes[3].MemTotalKB)
}

func TestDeviceLocality(t *testing.T) {
	root := fixture.Root(t, "xeon-2s-interleaved")
	tests := []struct {
		path string
		numa int
	}{
		{"/sys/bus/pci/devices/0000:3b:00.0", 0},
		{"/sys/class/net/ens801f0", 1},
		{"/sys/dev/char/226:128", 0},
		{"/sys/bus/pci/devices/0000:af:02.0", 1},
	}
	for _, tc := range tests {
		loc, err := sysfs.DeviceLocality(root, tc.path)
		require.NoError(t, err, tc.path)
		assert.Equal(t, tc.numa, loc.NUMA, tc.path)
		if tc.numa == 0 {
			assert.True(t, loc.CPUs.Contains(0) && !loc.CPUs.Contains(1), "%s local CPUs %s", tc.path, loc.CPUs)
		}
	}
	loc, err := sysfs.DeviceNodeLocality(root, "/dev/vfio/42", "c", 244, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, loc.NUMA)
	loc, err = sysfs.DeviceNodeLocality(root, "/dev/dri/renderD128", "c", 226, 128)
	require.NoError(t, err)
	assert.Equal(t, 0, loc.NUMA)

	_, err = sysfs.DeviceLocality(root, "/sys/class/net/nope0")
	assert.ErrorContains(t, err, "nope0")
	_, err = sysfs.DeviceLocality(root, "/dev/nvidia0")
	assert.ErrorContains(t, err, "not a sysfs path")
	_, err = sysfs.DeviceNodeLocality(root, "/dev/vfio/7", "c", 244, 1)
	assert.ErrorContains(t, err, "IOMMU group")
	// Finding 8: VFIO group paths were not cleaned, so ".." walked out of
	// the IOMMU groups (here onto the PCI devices, which resolved).
	_, err = sysfs.DeviceNodeLocality(root, "/dev/vfio/../../../sys/bus/pci", "c", 244, 0)
	assert.Error(t, err, "resolved by its device number, which has no NUMA node, not by the path")
	for _, bad := range []string{"/dev/vfio/4a", "/dev/vfio/-1"} {
		_, err = sysfs.DeviceNodeLocality(root, bad, "c", 244, 0)
		assert.ErrorContains(t, err, "not a VFIO group", bad)
	}
	loc, err = sysfs.DeviceNodeLocality(root, "/dev/vfio/./42", "c", 244, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, loc.NUMA)
}

func TestDiscoverErrors(t *testing.T) {
	cpu := "sys/devices/system/cpu"
	tests := []struct {
		name    string
		mutate  func(root string) error
		wantErr string
	}{
		{"not a sysfs root", func(root string) error { return os.RemoveAll(filepath.Join(root, "sys")) }, "is \""},
		{"malformed online list", func(root string) error {
			return os.WriteFile(filepath.Join(root, cpu, "online"), []byte("0-x\n"), 0o644)
		}, cpu + "/online: malformed CPU list"},
		{"missing CPU directory", func(root string) error { return os.RemoveAll(filepath.Join(root, cpu, "cpu5")) }, "cpu5 is missing"},
		{"missing core_id", func(root string) error { return os.Remove(filepath.Join(root, cpu, "cpu3/topology/core_id")) }, "cpu3/topology/core_id: file missing"},
		{"malformed siblings", func(root string) error {
			return os.WriteFile(filepath.Join(root, cpu, "cpu3/topology/core_cpus_list"), []byte("3,,-1"), 0o644)
		}, "cpu3/topology/core_cpus_list"},
		{"malformed cache list", func(root string) error {
			return os.WriteFile(filepath.Join(root, cpu, "cpu2/cache/index3/shared_cpu_list"), []byte("a"), 0o644)
		}, "cpu2/cache/index3/shared_cpu_list"},
		{"malformed isolated", func(root string) error {
			return os.WriteFile(filepath.Join(root, cpu, "isolated"), []byte("1-"), 0o644)
		}, cpu + "/isolated"},
		{"malformed cmdline isolcpus", func(root string) error {
			return os.WriteFile(filepath.Join(root, "proc/cmdline"), []byte("isolcpus=2-x"), 0o644)
		}, "proc/cmdline: isolcpus=2-x"},
		{"malformed node cpulist", func(root string) error {
			return os.WriteFile(filepath.Join(root, "sys/devices/system/node/node0/cpulist"), []byte("zz"), 0o644)
		}, "node0/cpulist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fixture.Root(t, "desktop-8c16t")
			require.NoError(t, tc.mutate(root))
			_, err := sysfs.Discover(root)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestDiscoverDegradesGracefully(t *testing.T) {
	root := fixture.Root(t, "desktop-8c16t")
	cpu := filepath.Join(root, "sys/devices/system/cpu")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "sys/devices/system/node")))
	require.NoError(t, os.RemoveAll(filepath.Join(cpu, "cpu4/cache")))
	require.NoError(t, os.RemoveAll(filepath.Join(cpu, "cpu4/cpufreq")))
	require.NoError(t, os.Remove(filepath.Join(cpu, "cpu4/topology/core_cpus_list")))
	require.NoError(t, os.Remove(filepath.Join(cpu, "isolated")))
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	require.Len(t, topo.NUMANodes, 1, "no node directory: one synthetic node")
	c, _ := topo.CPU(4)
	assert.Equal(t, sysfs.Unknown, c.L3)
	assert.Equal(t, sysfs.Unknown, c.L3Cache.ID)
	assert.Equal(t, 0, c.NUMA)
	assert.Equal(t, "4,12", c.Siblings.String(), "falls back to thread_siblings_list")
	assert.Zero(t, c.BaseFreqKHz)
}

func TestParseCmdlineCPUs(t *testing.T) {
	tests := []struct {
		cmdline, param, want string
		found                bool
		wantErr              bool
	}{
		{"ro isolcpus=2-5,8", "isolcpus", "2-5,8", true, false},
		{"isolcpus=managed_irq,domain,2-5", "isolcpus", "2-5", true, false},
		{"isolcpus=nohz,domain,managed_irq,1,3-4", "isolcpus", "1,3-4", true, false},
		{"nohz_full=4-7 isolcpus=1", "nohz_full", "4-7", true, false},
		{"quiet", "isolcpus", "", false, false},
		{"-- isolcpus=1", "isolcpus", "", false, false},
		{"isolcpus=1,domain", "isolcpus", "", true, true},
		{"isolcpus=3-1", "isolcpus", "", true, true},
		{"isolcpus=0-7:2/4", "isolcpus", "0-1,4-5", true, false},
		{"isolcpus=managed_irq,domain,1,16-31:1/2", "isolcpus", "1,16,18,20,22,24,26,28,30", true, false},
		{"nohz_full=2-15:2/4 isolcpus=1", "nohz_full", "2-3,6-7,10-11,14-15", true, false},
		{"isolcpus=0-7:2/0", "isolcpus", "", true, true},
	}
	for _, tc := range tests {
		set, found, err := sysfs.ParseCmdlineCPUs(tc.cmdline, tc.param)
		assert.Equal(t, tc.found, found, tc.cmdline)
		if tc.wantErr {
			assert.Error(t, err, tc.cmdline)
			continue
		}
		require.NoError(t, err, tc.cmdline)
		assert.Equal(t, tc.want, set.String(), tc.cmdline)
	}
}

func TestParseIsolcpusDomain(t *testing.T) {
	tests := []struct{ cmdline, want string }{
		{"ro isolcpus=2-5,8", "2-5,8"},                 // no flags: domain
		{"isolcpus=domain,2-5", "2-5"},                 // domain
		{"isolcpus=managed_irq,domain,2-5", "2-5"},     // domain among others
		{"isolcpus=managed_irq,2-5 nohz_full=2-5", ""}, // balanced
		{"isolcpus=nohz,managed_irq,1", ""},
		{"nohz_full=2-5", ""},
		{"quiet -- isolcpus=1", ""},
	}
	for _, tc := range tests {
		set, err := sysfs.ParseIsolcpusDomain(tc.cmdline)
		require.NoError(t, err, tc.cmdline)
		assert.Equal(t, tc.want, set.String(), tc.cmdline)
	}
	_, err := sysfs.ParseIsolcpusDomain("isolcpus=3-1")
	assert.Error(t, err)

	// The fixtures: domain-isolated per the kernel's mask and cmdline.
	for name, want := range map[string]string{"xeon-2s-interleaved": "2-39,42-79", "server-offline-isolcpus": "", "vm-2cpu": ""} {
		topo, err := sysfs.Discover(fixture.Root(t, name))
		require.NoError(t, err)
		assert.Equal(t, want, topo.DomainIsolated.String(), name)
	}
}

// TestDiscoverThisMachine reads the real sysfs; every Linux node must parse.
func TestDiscoverThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux sysfs")
	}
	topo, err := sysfs.Discover("/")
	require.NoError(t, err)
	assert.False(t, topo.Online.IsEmpty())
	assert.Equal(t, runtime.NumCPU() <= topo.Online.Size(), true)
}

// TestDiscoverHugePages: every node lists the x86 sizes, with no pages
// until some are reserved; the fixture's node 1 has 32 pages of 2 MiB, and
// a read at decision time sees what was reserved or taken since.
func TestDiscoverHugePages(t *testing.T) {
	root := fixture.Root(t, "vm-2numa-hugepages")
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	require.Len(t, topo.NUMANodes, 2)
	assert.Equal(t, []sysfs.HugePages{{SizeKB: 2048}, {SizeKB: 1048576}}, topo.NUMANodes[0].HugePages)
	assert.Equal(t, []sysfs.HugePages{{SizeKB: 2048, Total: 32, Free: 32}, {SizeKB: 1048576}}, topo.NUMANodes[1].HugePages)
	assert.Equal(t, int64(4194304), topo.NUMANodes[1].MemTotalKB)

	dir := filepath.Join(root, "sys/devices/system/node/node1/hugepages/hugepages-2048kB")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "free_hugepages"), []byte("20\n"), 0o644))
	now, err := sysfs.ReadHugePages(root, []int{0, 1}, 7)
	require.NoError(t, err)
	assert.Equal(t, sysfs.HugePages{SizeKB: 2048, Total: 32, Free: 20, Seq: 7}, now[1][0], "numbered as the caller says")
	assert.Equal(t, sysfs.HugePages{SizeKB: 2048, Seq: 7}, now[0][0])
	// The reply path's reading: only the sizes asked for; a size the
	// kernel lacks is no pool. The files it keeps open show each new
	// count, as sysfs does at each read from offset 0.
	counter := sysfs.NewHugePageCounter(root)
	for i, free := range []string{"20", "5", "32"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "free_hugepages"), []byte(free+"\n"), 0o644))
		counts, err := counter.Read([]int{0, 1}, []int64{2048, 64}, uint64(9+i))
		require.NoError(t, err)
		n, _ := strconv.ParseInt(free, 10, 64)
		assert.Equal(t, map[int][]sysfs.HugePages{
			0: {{SizeKB: 2048, Seq: uint64(9 + i)}, {SizeKB: 64, Seq: uint64(9 + i)}},
			1: {{SizeKB: 2048, Total: 32, Free: n, Seq: uint64(9 + i)}, {SizeKB: 64, Seq: uint64(9 + i)}},
		}, counts)
	}
	require.NoError(t, counter.Close())
	counts, err := counter.Read([]int{1}, []int64{2048}, 12)
	require.NoError(t, err, "read after Close: each file opened and closed")
	assert.Equal(t, int64(32), counts[1][0].Free)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "free_hugepages"), []byte("20\n"), 0o644))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "nr_hugepages"), []byte("many\n"), 0o644))
	_, err = sysfs.ReadHugePages(root, []int{1}, 8)
	assert.ErrorContains(t, err, "nr_hugepages")
	_, err = sysfs.NewHugePageCounter(root).Read([]int{1}, []int64{2048}, 13)
	assert.ErrorContains(t, err, "nr_hugepages")
	assert.Equal(t, "2Mi", sysfs.HugePageSizeName(2048))
	assert.Equal(t, "1Gi", sysfs.HugePageSizeName(1048576))
	assert.Equal(t, "64Ki", sysfs.HugePageSizeName(64))
}

// TestDiscoverPossible: the possible mask is read with the others (a VM's
// slots for hot-added vCPUs lie beyond the present ones), and a kernel
// without the file has the present CPUs as possible.
func TestDiscoverPossible(t *testing.T) {
	topo, err := sysfs.Discover(fixture.Root(t, "sparse-4096"))
	require.NoError(t, err)
	assert.Equal(t, "0-4095", topo.PossibleCPUs().String())

	root := fixture.Root(t, "desktop-8c16t")
	require.NoError(t, os.Remove(filepath.Join(root, "sys/devices/system/cpu/possible")))
	topo, err = sysfs.Discover(root)
	require.NoError(t, err)
	assert.Equal(t, "0-15", topo.PossibleCPUs().String())

	// A topology built by hand has at least its present CPUs as possible.
	assert.Equal(t, "0-15", (&sysfs.Topology{Present: topo.Present}).PossibleCPUs().String())

	// Every CPU, online or not: an offline CPU is still the node's.
	require.NoError(t, os.WriteFile(filepath.Join(root, "sys/devices/system/cpu/online"), []byte("0-14\n"), 0o644))
	topo, err = sysfs.Discover(root)
	require.NoError(t, err)
	assert.Equal(t, "0-15", topo.AllCPUsWhere(func(sysfs.CPU) bool { return true }).String())
	assert.Equal(t, "0-14", topo.CPUsWhere(func(sysfs.CPU) bool { return true }).String())
}
