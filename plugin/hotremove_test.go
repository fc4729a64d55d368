package plugin

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config/nodecheck"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// hotRemoveAt takes cpu out of the present and online masks of a fake
// sysfs tree, as a hypervisor's vCPU unplug does, and moves its directory
// away. The function it returns adds the vCPU back, offline, as the
// hypervisor's hot-add does; setOnlineAt brings it online.
func hotRemoveAt(t *testing.T, root string, cpu int) (hotAdd func()) {
	t.Helper()
	setOnlineAt(t, root, cpu, false)
	dir := filepath.Join(root, "sys/devices/system/cpu")
	present := func() cpuset.CPUSet {
		data, err := os.ReadFile(filepath.Join(dir, "present"))
		require.NoError(t, err)
		set, err := cpuset.Parse(string(trimNL(data)))
		require.NoError(t, err)
		return set
	}
	offline, err := os.ReadFile(filepath.Join(dir, "offline"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "present"), []byte(present().Difference(cpuset.New(cpu)).String()+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "offline"), []byte("\n"), 0o644))
	// Beside the tree (one file system), out of the kernel's paths.
	cpuDir, away := filepath.Join(dir, "cpu"+strconv.Itoa(cpu)), filepath.Join(root, "unplugged-cpu"+strconv.Itoa(cpu))
	require.NoError(t, os.Rename(cpuDir, away))
	return func() {
		require.NoError(t, os.Rename(away, cpuDir))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "present"), []byte(present().Union(cpuset.New(cpu)).String()+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "offline"), offline, 0o644))
	}
}

// TestHotRemovedCPUConfigStillReloadsAndStarts: with a pool given by
// count (exclusive: count 12 of 12 isolated CPUs, isolatedCPUs naming
// CPU 15), a hypervisor hot-removes vCPU 15. The running daemon follows
// it (the pool loses it) and says the config no longer fits the node. The
// config it runs with must stay good for a reload (the same file,
// SIGHUP), for validate (nodecheck.Check, which the unit runs before run)
// and for a restart (New): a CPU the node can still hot-add
// (cpu/possible) is a warning, as an offline one is, and a count it no
// longer fits is clamped with a warning. Else after the next restart,
// upgrade or crash the daemon refused to start and no container was
// pinned at all (review rvB, H1). When the vCPU is added back and online,
// the pool has all 12 again.
func TestHotRemovedCPUConfigStillReloadsAndStarts(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopExclusive12, statePath(f), fastHotplug)
	root := f.sysfsRoot(desktopExclusive12.fixture)
	hotAdd := hotRemoveAt(t, root, 15)
	waitLayout(t, rp, "2-7,10-14")
	require.Eventually(t, func() bool {
		return strings.Contains(rp.log.String(), "hotplug: CPU 15 hot-removed: the config no longer fits the node")
	}, 3*time.Second, 5*time.Millisecond, "the unplug is said when it happens:\n%s", rp.log.String())

	err := rp.p.Reload(reloadConfig(t, rp, desktopExclusive12.config), nil, "SIGHUP")
	require.NoError(t, err, "the config the daemon runs with, reloaded unchanged, is refused")
	ex, _ := layoutNow(rp)
	assert.Equal(t, "2-7,10-14", ex, "the reload keeps the pool as it is")

	topo, derr := sysfs.Discover(root)
	require.NoError(t, derr)
	_, problems := nodecheck.Check(topo, reloadConfig(t, rp, desktopExclusive12.config))
	require.False(t, problems.HasErrors(), "validate refuses the config the daemon runs with: %v", problems.Errors())
	assert.Contains(t, problems.Warnings().Error(), "isolatedCPUs: CPU 15 is not present")
	assert.Contains(t, problems.Warnings().Error(), "pools.exclusive.count: asks for 12 CPUs but only 11 are left to carve: isolated CPU 15 is not present")

	// Hot-added back and online, CPU 15 is the exclusive pool's again.
	hotAdd()
	setOnlineAt(t, root, 15, true)
	waitLayout(t, rp, "2-7,10-15")

	// The restart itself, with 15 gone again: New, as run makes the
	// plugin, pins as the running daemon did.
	rp.stop()
	hotRemoveAt(t, root, 15)
	topo, derr = sysfs.Discover(root)
	require.NoError(t, derr)
	cfg := reloadConfig(t, rp, desktopExclusive12.config)
	p, nerr := New(cfg, topo, state.NewFileStore(statePath(f)), logrus.New())
	require.NoError(t, nerr, "the daemon does not start again after the vCPU unplug")
	_, l := p.Layout()
	assert.Equal(t, "2-7,10-14", l.Exclusive.String())
	assert.Equal(t, "0-1,8-9", l.Infra.String())
}
