package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// newRememberedOfflineAllocator is newOfflineAllocator on the topology as
// the daemon sees it: the offline CPUs given the place the record of the
// CPUs seen online (made while every CPU was online) remembers.
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

// full-pcpus-only takes whole cores, offline threads included: with every
// second thread offline no core is whole online, and a container placed
// on one thread would share its core with the next container once the
// sibling comes online free. It is refused, and placed on a whole core
// once the siblings are online.
func TestFullPCPUsOnlyWithEverySecondThreadOfflineIsRefusedUntilTheyComeOnline(t *testing.T) {
	a := newRememberedOfflineAllocator(t, "desktop-8c16t", siblingsExclusiveConfig, cpuset.New(8, 9, 10, 11, 12, 13, 14, 15))
	full := exclusive("full", 2)
	full.Options.FullPCPUsOnly = true
	_, err := a.Allocate(full)
	assert.ErrorContains(t, err, "as whole cores (0 whole cores free)")
	one := exclusive("one", 1)
	one.Options.FullPCPUsOnly = true
	_, err = a.Allocate(one)
	assert.ErrorContains(t, err, "full-pcpus-only takes whole cores of 2 threads")

	on := topology(t, "desktop-8c16t")
	a, _ = a.Rebase(on, mustHotplug(t, a, on, siblingsExclusiveConfig))
	res, err := a.Allocate(full)
	require.NoError(t, err)
	assert.Nil(t, a.partCore(res.Assignment.CPUs), "whole cores: %s", res.Assignment.CPUs)
	checkInvariants(t, a)
}
