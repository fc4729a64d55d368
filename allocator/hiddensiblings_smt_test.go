package allocator

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// discoverSMT is discoverOffline with smt/control set.
func discoverSMT(t *testing.T, name, smt string, offline cpuset.CPUSet) *sysfs.Topology {
	t.Helper()
	dir, err := fixture.SpecDir()
	require.NoError(t, err)
	spec, err := fixture.LoadSpec(filepath.Join(dir, name+".yaml"))
	require.NoError(t, err)
	spec.Offline = offline.String()
	spec.SMT = smt
	root := shmDir(t)
	require.NoError(t, spec.Write(root))
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	return topo
}

const siblingsExclusiveConfig = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
`

// The daemon started with SMT off (smt/control "off": the pools are carved
// on the online CPUs, so the carving has no second thread), then SMT was
// turned on (every sibling joins its pool) and then the siblings 12-15 of
// exclusive's cores went offline. Each of them rejoins exclusive when it
// comes online, so a hide-hyperthreads container must be placed, as a
// restart in the very same state places it: the running layout must not
// keep the SMT-off carving, which says every sibling goes elsewhere.
func TestHideHyperthreadsPlacedAfterSMTTurnedOnAndSiblingsOffline(t *testing.T) {
	cfg := parseConfig(t, siblingsExclusiveConfig)
	smtOff := discoverSMT(t, "desktop-8c16t", "off", cpuset.New(8, 9, 10, 11, 12, 13, 14, 15))
	l, problems := BuildLayoutRunning(smtOff, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	a := New(smtOff, l, false)

	on := discoverSMT(t, "desktop-8c16t", "on", cpuset.New())
	a, _ = a.Rebase(on, mustHotplug(t, a, on, siblingsExclusiveConfig))
	require.Equal(t, "4-7,12-15", a.PoolCPUs("exclusive").String())
	off := discoverSMT(t, "desktop-8c16t", "on", cpuset.New(12, 13, 14, 15))
	a, _ = a.Rebase(off, mustHotplug(t, a, off, siblingsExclusiveConfig))
	require.Equal(t, "4-7", a.PoolCPUs("exclusive").String())

	hide := exclusive("hide", 1)
	hide.Options.HideHyperthreads = true
	fresh := newOfflineAllocator(t, "desktop-8c16t", siblingsExclusiveConfig, cpuset.New(12, 13, 14, 15))
	_, err := fresh.Allocate(hide)
	require.NoError(t, err, "a restart in this state places it")
	_, err = a.Allocate(hide)
	assert.NoError(t, err, "the running daemon must place it too: 12-15 rejoin exclusive")
}

// While the config cannot be laid out on the node (exclusive's count of
// 12 no longer fits once 15 is unplugged), a CPU that comes online goes
// to infra. The carving must say so, also for a CPU that goes offline
// afterwards: else a hide-hyperthreads container counts on sibling 12
// joining exclusive, and 12 joins infra beside it.
func TestHotplugCarvingWhileConfigFailsSendsOfflineCPUsToInfra(t *testing.T) {
	full := topology(t, "desktop-8c16t")
	cfg := parseConfig(t, `{isolatedCPUs: "2-7,10-15", reservedCPUs: "0,8", pools: {exclusive: {count: 12}}}`)
	start, problems := BuildLayout(full, cfg)
	require.False(t, problems.HasErrors())
	require.Equal(t, "2-7,10-15", start.carvedPool("exclusive", false).String())

	gone := unplugged(full, 15)
	down, _ := HotplugLayout(start, withOffline(gone, 7), cfg)
	back, problems := HotplugLayout(down, gone, cfg)
	require.True(t, problems.HasErrors(), "12 CPUs cannot be carved from 11")
	require.Equal(t, "0-1,7-9", back.Infra.String(), "7 came online in infra")
	assert.False(t, back.carvedPool("exclusive", true).Contains(7), "7 is infra's: %s", back.carvedPool("exclusive", true))

	off, _ := HotplugLayout(back, withOffline(gone, 12), cfg)
	assert.False(t, off.carvedPool("exclusive", false).Contains(12), "12 joins infra when it comes online: %s", off.carvedPool("exclusive", false))
	on, problems := HotplugLayout(off, gone, cfg)
	require.True(t, problems.HasErrors())
	assert.True(t, on.Infra.Contains(12), "and it does: infra %s", on.Infra)
}
