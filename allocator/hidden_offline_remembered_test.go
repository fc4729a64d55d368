package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// newRememberedOfflineAllocator is newOfflineAllocator on the topology as
// the daemon sees it: with the record of the CPUs seen online (made while
// every CPU was online), which tells the core each offline CPU joins.
func newRememberedOfflineAllocator(t *testing.T, fixtureName, yaml string, offline cpuset.CPUSet) *Allocator {
	t.Helper()
	rec, _ := topology(t, fixtureName).Remember(sysfs.Remembered{})
	topo := discoverOffline(t, fixtureName, offline).WithRemembered(rec)
	cfg := parseConfig(t, yaml)
	l, problems := BuildLayoutRunning(topo, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	return New(topo, l, cfg.PinMemory)
}

// Every second thread offline by per-CPU hotplug (smt/control still "on",
// the pre-4.19 way of turning SMT off, or a node booted with maxcpus=):
// no online core shows two threads, so no thread pattern tells where an
// offline thread sits, and the node looked like one without SMT. A
// hide-hyperthreads container was placed by threads, on core 4, whose
// sibling 12 joins shared when it comes online: shared's load then ran
// beside the container that asked for the core alone. The record of the
// CPUs seen online tells each offline thread's core: it takes core 7,
// whose sibling 15 is exclusive's, and holds 15 idle once online.
func TestHideHyperthreadsWithEverySecondThreadOfflineTakesNoCoreWhoseSiblingJoinsShared(t *testing.T) {
	a := newRememberedOfflineAllocator(t, "desktop-8c16t", siblingsSplitConfig, cpuset.New(8, 9, 10, 11, 12, 13, 14, 15))
	require.Equal(t, "4-7", a.PoolCPUs("exclusive").String())
	hide := exclusive("hide", 1)
	hide.Options.HideHyperthreads = true
	res, err := a.Allocate(hide)
	require.NoError(t, err)
	assert.Equal(t, "7", res.Assignment.CPUs.String(), "only 7's sibling (15) joins exclusive; 12-14 join shared")

	full := topology(t, "desktop-8c16t")
	a, _ = a.Rebase(full, mustHotplug(t, a, full, siblingsSplitConfig))
	h, _ := a.Get("hide")
	assert.Equal(t, "15", h.Reserved.String(), "its sibling came online idle for it")
	shared := a.PoolCPUs("shared")
	assert.True(t, shared.Intersection(a.hiddenSiblings(h.CPUs)).IsEmpty(),
		"no shared CPU on the hide-hyperthreads container's core: container on %s, shared %s", h.CPUs, shared)
}

// The reload check knows the offline sibling too: a hide-hyperthreads
// container on a core whose offline sibling joins exclusive (free, its
// idle sibling once online) has it among its OfflineHiddenSiblings, so a
// reload giving it to shared is refused.
func TestOfflineHiddenSiblingsKnownWithEverySecondThreadOffline(t *testing.T) {
	a := newRememberedOfflineAllocator(t, "desktop-8c16t", siblingsExclusiveConfig, cpuset.New(8, 9, 10, 11, 12, 13, 14, 15))
	hide := exclusive("hide", 1)
	hide.Options.HideHyperthreads = true
	res, err := a.Allocate(hide)
	require.NoError(t, err)
	as := res.Assignment
	sib := cpuset.New(as.CPUs.List()[0] + 8)
	assert.Equal(t, sib.String(), a.OfflineHiddenSiblings(&as).String(), "its core's offline sibling joins exclusive and is no one else's")
}

// plainExclusiveConfig gives exclusive the cores 4-7 with their siblings.
const plainExclusiveConfig = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
`

// Every second thread offline by the admin (per-CPU hotplug, smt/control
// "on") after the daemon once saw them online (the record names them).
// full-pcpus-only takes whole cores of the online threads per core (1
// here), as the kubelet's static policy counts them (cadvisor leaves
// offline CPUs out): the record does not change the unit, so a node that
// placed such pods keeps placing them, with or without a record.
func TestFullPCPUsOnlyWithSiblingsOfflineForGoodIsPlacedAsWithoutTheRecord(t *testing.T) {
	a := newRememberedOfflineAllocator(t, "desktop-8c16t", plainExclusiveConfig, cpuset.New(8, 9, 10, 11, 12, 13, 14, 15))
	req := exclusive("full", 2)
	req.Options.FullPCPUsOnly = true
	_, err := a.Allocate(req)
	assert.NoError(t, err, "with the record")
	b := newOfflineAllocator(t, "desktop-8c16t", plainExclusiveConfig, cpuset.New(8, 9, 10, 11, 12, 13, 14, 15))
	_, err = b.Allocate(req)
	assert.NoError(t, err, "no record")
	one := exclusive("one", 1)
	one.Options.FullPCPUsOnly = true
	_, err = a.Allocate(one)
	assert.NoError(t, err, "one thread is one whole core of the online threads")
}

// A VM downsized by hot-unplugging every core's second vCPU (they stay in
// the possible mask, so the record puts them back as absent CPUs):
// threads per core is that of the online cores (1), as the kubelet's
// CPUsPerCore, and a full-pcpus-only container is placed.
func TestFullPCPUsOnlyOnAVMWhoseSecondVCPUsWereHotRemovedIsPlacedAsBefore(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	rec, _ := full.Remember(sysfs.Remembered{})
	topo := unplugged(full, 8, 9, 10, 11, 12, 13, 14, 15).WithRemembered(rec)
	require.Equal(t, "8-15", topo.Absent.String())
	cfg := parseConfig(t, plainExclusiveConfig)
	l, problems := BuildLayoutRunning(topo, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	a := New(topo, l, cfg.PinMemory)
	req := exclusive("full", 2)
	req.Options.FullPCPUsOnly = true
	_, err := a.Allocate(req)
	assert.NoError(t, err, "the kubelet's static policy admits it (CPUsPerCore 1)")
	one := exclusive("one", 1)
	one.Options.FullPCPUsOnly = true
	_, err = a.Allocate(one)
	assert.NoError(t, err)
}

// Count pools are carved the same with and without the record: the
// remembered core of an offline CPU tells only hidden siblings, so the
// first restart after an upgrade (which reads a record the old release
// wrote) moves no CPU between pools under running containers.
func TestCarvingWithEverySecondThreadOfflineIsTheSameWithAndWithoutTheRecord(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	rec, _ := full.Remember(sysfs.Remembered{})
	off := cpuset.New(8, 9, 10, 11, 12, 13, 14, 15)
	for _, yaml := range []string{
		"isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 6}}\n",
		"isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 5}, shared: {count: 4}}\n",
		"isolatedCPUs: \"2-7,10-15\"\nreservedCPUs: \"0,8\"\npools: {exclusive: {count: 9}}\n",
	} {
		cfg := parseConfig(t, yaml)
		before, p1 := BuildLayoutRunning(discoverOffline(t, "desktop-8c16t", off), cfg)
		after, p2 := BuildLayoutRunning(discoverOffline(t, "desktop-8c16t", off).WithRemembered(rec), cfg)
		require.False(t, p1.HasErrors() || p2.HasErrors(), "%v %v", p1, p2)
		assert.Equal(t, before.Exclusive.String(), after.Exclusive.String(), "%q exclusive", yaml)
		assert.Equal(t, before.Shared.String(), after.Shared.String(), "%q shared", yaml)
	}
}

// A stale or hostile record (another BIOS numbering, a copied image) that
// remembers offline CPU 41 (the kernel lists it on NUMA node 2, socket 1)
// as CPU 2's sibling (socket 0, node 0) joins it to no core: the kernel's
// NUMA node wins, so CPU 2's core has no offline thread, and the
// allocator places on the node as without the entry.
func TestRememberedOfflineCPUJoinsNoCoreOfAnotherNUMANode(t *testing.T) {
	full := topology(t, "xeon-2s-snc2")
	rec, _ := full.Remember(sysfs.Remembered{})
	// 41 remembered as CPU 2's sibling; 42, CPU 2's real sibling, never
	// seen online (no entry).
	var kept []sysfs.RememberedCPU
	for _, r := range rec.CPUs {
		switch r.ID {
		case 42:
			continue
		case 41:
			two := rec.CPUs[2]
			require.Equal(t, 2, two.ID)
			r = two
			r.ID, r.Siblings = 41, "2,41"
		}
		kept = append(kept, r)
	}
	rec.CPUs = kept
	off := cpuset.New()
	for id := 40; id < 80; id++ {
		off = off.Union(cpuset.New(id))
	}
	topo := discoverOffline(t, "xeon-2s-snc2", off).WithRemembered(rec)
	c41, _ := topo.CPU(41)
	require.Equal(t, 2, c41.NUMA, "the kernel lists 41 on node 2")
	assert.NotContains(t, topo.OfflineCoreMates, 41, "41 joins no core of node 0")
	cfg := parseConfig(t, `{isolatedCPUs: "2-39,42-79", reservedCPUs: "0-1,40-41", pools: {exclusive: {cpus: "2-39,42-79"}}}`)
	l, problems := BuildLayoutRunning(topo, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	a := New(topo, l, cfg.PinMemory)
	assert.NotContains(t, a.offlineThreads(2), 41, "CPU 2's core has no thread on another node")
	hide := exclusive("hide", 4)
	hide.Options.HideHyperthreads = true
	_, err := a.Allocate(hide)
	assert.NoError(t, err)
	checkInvariants(t, a)
}

// A 4-way SMT node (POWER with ppc64_cpu --smt=1, which offlines threads
// per CPU) with every core's threads but its lowest offline, and a true
// record made while all were online: each core keeps its 4 threads, so a
// hide-hyperthreads container on it holds its 3 offline siblings idle
// once online, not 1 of them.
func TestRememberedCoreKeepsEveryThreadOfAFourWayCore(t *testing.T) {
	name := "kubelet-quad-socket-four-way-ht"
	full := topology(t, name)
	rec, _ := full.Remember(sysfs.Remembered{})
	lowest := map[int]int{}
	for _, c := range full.CPUs {
		if l, ok := lowest[c.Core]; !ok || c.ID < l {
			lowest[c.Core] = c.ID
		}
	}
	off := cpuset.New()
	for _, c := range full.CPUs {
		if lowest[c.Core] != c.ID {
			off = off.Union(cpuset.New(c.ID))
		}
	}
	topo := discoverOffline(t, name, off).WithRemembered(rec)
	cfg := parseConfig(t, `{isolatedCPUs: "1-108,110-168,170-228,230-287", pools: {exclusive: {cpus: "1,13,25,38"}}}`)
	l, problems := BuildLayoutRunning(topo, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	a := New(topo, l, cfg.PinMemory)
	assert.Equal(t, []int{109, 169, 229}, a.offlineThreads(0), "CPU 0's core as the record (and the kernel, all online) has it")
	hide := exclusive("hide", 1)
	hide.Options.HideHyperthreads = true
	res, err := a.Allocate(hide)
	require.NoError(t, err)
	as := res.Assignment
	assert.Equal(t, "1", as.CPUs.String())
	assert.Equal(t, "13,25,38", a.OfflineHiddenSiblings(&as).String(), "its 3 offline siblings join exclusive")
	assert.Equal(t, 1, a.x.threadsPerCore, "threads per core stays the online cores'")
}
