package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/config/nodecheck"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// TestHotRemovedCPURestartAndReloadWithTheSameConfigStart: with a pool
// given by count (exclusive: count 12 of 12 isolated CPUs), a hypervisor
// hot-removes one vCPU. The running daemon follows it. The config it runs
// with, unchanged, must still be valid for a reload (SIGHUP), for
// validate (nodecheck on the node as the daemon remembers it) and for a
// restart (New): before, all three refused it ("CPU 15 does not exist",
// the count does not fit) and after the next restart nothing was pinned.
func TestHotRemovedCPURestartAndReloadWithTheSameConfigStart(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopExclusive12, statePath(f), fastHotplug)
	root := f.sysfsRoot(desktopExclusive12.fixture)
	hotRemoveAt(t, root, 15)
	waitLayout(t, rp, "2-7,10-14")
	time.Sleep(50 * time.Millisecond)
	running, _ := layoutNow(rp)

	err := rp.p.Reload(reloadConfig(t, rp, desktopExclusive12.config), nil, "SIGHUP")
	assert.NoError(t, err, "the config the daemon runs with, reloaded unchanged, is refused")
	ex, _ := layoutNow(rp)
	assert.Equal(t, running, ex, "an unchanged reload changes the exclusive pool")

	topo, derr := sysfs.Discover(root)
	require.NoError(t, derr)
	cfg := reloadConfig(t, rp, desktopExclusive12.config)
	node, _, nerr := nodecheck.Node(topo, cfg)
	require.NoError(t, nerr)
	layout, problems := nodecheck.Check(node, cfg)
	assert.False(t, problems.HasErrors(), "validate refuses the config the daemon runs with: %v", problems.Errors())
	assert.Equal(t, running, layout.Exclusive.String(), "validate lays out another exclusive pool")
	assert.Contains(t, problemsText(problems.Warnings()), "CPU 15 is configured but not present")

	// The restart itself: New, as run makes the plugin.
	rp.stop()
	log := logrus.New()
	var out strings.Builder
	log.SetOutput(&out)
	p, nerr := New(cfg, topo, state.NewFileStore(statePath(f)), log)
	require.NoError(t, nerr, "the daemon does not start again after the vCPU unplug")
	defer p.Close()
	_, l := p.Layout()
	assert.Equal(t, running, l.Exclusive.String(), "the restart lays out another exclusive pool")
	assert.Equal(t, 1, strings.Count(out.String(), "configured but not present"), "said once at the restart:\n%s", out.String())
}

var exclusive8Shared4 = testNode{fixture: "desktop-8c16t", config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {count: 8}
  shared: {count: 4}
`}

// TestHotRemovedCPUUnchangedReloadMovesNoSharedContainer: with exclusive
// count 8 and shared count 4, vCPU 13 (exclusive, free) is hot-removed.
// The running daemon keeps shared 6-7,14-15; the config it runs with,
// reloaded unchanged, keeps it too: before, the reload carved the counts
// on the smaller node and moved the shared container.
func TestHotRemovedCPUUnchangedReloadMovesNoSharedContainer(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, exclusive8Shared4, statePath(f), fastHotplug)
	require.Equal(t, "6-7,14-15", sharedNow(rp))
	pod := f.runPod(podSpec{name: "sh", annotations: map[string]string{"pool.cpupool.dev": "shared"}})
	ctr, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	before := f.cpus(ctr)

	hotRemoveAt(t, f.sysfsRoot(exclusive8Shared4.fixture), 13)
	waitLayout(t, rp, "2-5,10-12")
	require.Equal(t, "6-7,14-15", sharedNow(rp))

	err = rp.p.Reload(reloadConfig(t, rp, exclusive8Shared4.config), nil, "SIGHUP")
	assert.NoError(t, err, "the config the daemon runs with, reloaded unchanged")
	ex, _ := layoutNow(rp)
	assert.Equal(t, "2-5,10-12", ex, "an unchanged reload changes the exclusive pool")
	assert.Equal(t, "6-7,14-15", sharedNow(rp), "an unchanged reload changes the shared pool")
	assert.Equal(t, before, f.cpus(ctr), "an unchanged reload moves the shared container")
}

var dualSocketExclusive5 = testNode{fixture: "kubelet-dual-socket-ht", config: `
isolatedCPUs: "2-11"
reservedCPUs: "0"
pools:
  exclusive: {count: 5}
allowedNamespaces:
  exclusive: [telco]
`}

// TestHotRemovedCPURestartKeepsTheExclusivePoolAndItsContainers:
// exclusive count 5 on a two-socket node is 2-3,6,8-9. vCPU 4 (infra) is
// hot-removed: the running daemon changes no pool. An unchanged reload and
// a restart with the same config must lay exclusive out the same and move
// no exclusive container: before, the restart carved 2-3,7-9 and left the
// container on CPU 6 in infra.
func TestHotRemovedCPURestartKeepsTheExclusivePoolAndItsContainers(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, dualSocketExclusive5, statePath(f), fastHotplug)
	ex, _ := layoutNow(rp)
	require.Equal(t, "2-3,6,8-9", ex)
	ctrs := map[string]string{}
	var objs []*api.Container
	for i := 0; i < 5; i++ {
		pod := f.runPod(podSpec{name: "ex" + string(rune('a'+i)), namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
		ctr, _, err := f.createContainer(pod, "c", 1000)
		require.NoError(t, err)
		ctrs[ctr.Id] = f.cpus(ctr)
		objs = append(objs, ctr)
	}

	hotRemoveAt(t, f.sysfsRoot(dualSocketExclusive5.fixture), 4)
	require.Eventually(t, func() bool { _, infra := layoutNow(rp); return !cpuset4In(infra) }, 3*time.Second, 5*time.Millisecond)
	ex, _ = layoutNow(rp)
	assert.Equal(t, "2-3,6,8-9", ex, "running daemon")

	err := rp.p.Reload(reloadConfig(t, rp, dualSocketExclusive5.config), nil, "SIGHUP")
	assert.NoError(t, err, "the config the daemon runs with, reloaded unchanged, is refused")
	ex, _ = layoutNow(rp)
	assert.Equal(t, "2-3,6,8-9", ex, "after an unchanged reload")

	rp.stop()
	second := startPlugin(t, f, dualSocketExclusive5, statePath(f), fastHotplug)
	ex, _ = layoutNow(second)
	assert.Equal(t, "2-3,6,8-9", ex, "after a restart")
	for _, c := range objs {
		assert.Equal(t, ctrs[c.Id], f.cpus(c), "container %s after a restart", c.Id)
	}
	if t.Failed() {
		t.Logf("restart log: %s", second.log.String())
	}
}

func cpuset4In(s string) bool {
	set, err := cpuset.Parse(s)
	return err == nil && set.Contains(4)
}

func problemsText(ps config.Problems) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Key+": "+p.Message)
	}
	return strings.Join(out, "; ")
}
