package plugin

import (
	"fmt"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/state"
)

// A quota-lifted 300-CPU container; while the plugin is down 30 CPUs of
// its record go offline (cgroup v1 drops them from its cpuset) and 20 come
// back (cgroup v1 never gives them back). No resize happened and no other
// container runs on any of its CPUs: it is pinned back on its record's 290
// online CPUs, its 10 offline ones held for it, its request 300 CPUs as
// the kubelet wants. Repin refused a record with any offline CPU, and the
// restart read that refusal as a live shrink whose given-back CPUs were
// taken: it was kept on 270 CPUs, its request rewritten to 270000m and
// persisted, the 10 offline CPUs dropped from its record.
func TestAQuotaLiftedContainerWithRecordCPUsStillOfflineIsPinnedBackHoldingThem(t *testing.T) {
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, epyc, statePath(f))
	f.dress = func(c *api.Container) {
		c.Linux.Resources.Cpu.Shares = api.UInt64(262144)
		c.Linux.Resources.Cpu.Quota = api.Int64(300 * 100000)
	}
	pod := f.runPod(podSpec{name: "g", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	g, _, err := f.createContainer(pod, "big", 300000)
	require.NoError(t, err)
	f.mu.Lock()
	g.Linux.Resources.Cpu.Quota = api.Int64(-1) // the plugin lifted it
	f.mu.Unlock()
	rec := mustParse(f.cpus(g))
	require.Equal(t, 300, rec.Size())
	require.NoError(t, first.p.Flush())
	first.kill()

	ids := rec.List()
	root := f.sysfsRoot(epyc.fixture)
	for _, id := range ids[len(ids)-30:] {
		setOnlineAt(t, root, id, false)
	}
	for _, id := range ids[len(ids)-30 : len(ids)-10] {
		setOnlineAt(t, root, id, true) // back online; cgroup v1 does not give them back
	}
	stillOff := cpuset.New(ids[len(ids)-10:]...)
	f.setCPUs(g, cpuset.New(ids[:len(ids)-30]...).String())

	second := startPlugin(t, f, epyc, statePath(f))
	a, ok := second.p.alloc.Get(g.GetId())
	require.True(t, ok)
	log := second.log.String()
	t.Logf("after restart: pool %s, %d CPUs (%dm), runtime %d CPUs\n%s", a.Pool, a.CPUs.Size(), a.MilliCPU, mustParse(f.cpus(g)).Size(), log)
	assert.NotContains(t, log, "a shrink whose record a kill lost", "no shrink happened: CPUs went offline")
	assert.Equal(t, int64(300000), a.MilliCPU, "the kubelet still wants 300 CPUs")
	assert.True(t, stillOff.IsSubsetOf(a.CPUs), "its offline CPUs stay its own, held offline: record %s", a.CPUs)
	assert.Equal(t, rec.Difference(stillOff).String(), f.cpus(g), "pinned back on its record's online CPUs")
	require.NoError(t, second.p.Flush())
	st, err := state.ReadState(statePath(f))
	require.NoError(t, err)
	assert.Equal(t, int64(300000), st.Containers[g.GetId()].MilliCPU, "persisted request")
}

// The same for an exact-request container: of its 4 CPUs one went offline
// and came back (cgroup v1 dropped it), another is still offline. It is
// pinned back on its record's online CPUs, the offline one held for it.
// Repin refused any offline CPU, so it was placed anew (moved off a CPU it
// ran on, its offline CPU no longer held for it), logged without a reason.
func TestAnExactRequestContainerWithACPUStillOfflineIsPinnedBackHoldingIt(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "x", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	x, _, err := f.createContainer(pod, "c", 4000)
	require.NoError(t, err)
	rec := mustParse(f.cpus(x))
	require.NoError(t, first.p.Flush())
	first.kill()
	ids := rec.List()
	root := f.sysfsRoot(desktop.fixture)
	setOnlineAt(t, root, ids[2], false)
	setOnlineAt(t, root, ids[3], false)
	setOnlineAt(t, root, ids[2], true)
	f.setCPUs(x, cpuset.New(ids[0], ids[1]).String())
	second := startPlugin(t, f, desktop, statePath(f))
	a, _ := second.p.alloc.Get(x.GetId())
	t.Logf("record %s, after restart %s, runtime %s\n%s", rec, a.CPUs, f.cpus(x), second.log.String())
	assert.True(t, cpuset.New(ids[0], ids[1]).IsSubsetOf(mustParse(f.cpus(x))), "not moved off the CPUs it runs on")
	assert.True(t, a.CPUs.Contains(ids[3]), "its offline CPU stays its own")
	assert.Equal(t, cpuset.New(ids[:3]...).String(), f.cpus(x), "pinned back on its record's online CPUs")
	assert.Equal(t, rec.String(), a.CPUs.String(), "its record unchanged")
}

// A stopped container's hold, at a restart with a config that gives one
// of its CPUs, offline meanwhile, to the shared pool: that CPU leaves the
// hold (held, the container's next run would start on a shared-pool CPU
// once it is online), the rest stays held, and the log says which and why.
func TestAHoldLetsGoAtARestartOfAnOfflineCPUTheConfigGaveTheSharedPool(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "x", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	x, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	rec := mustParse(f.cpus(x))
	require.Equal(t, 2, rec.Size())
	f.stopContainer(x)
	require.NoError(t, first.p.Flush())
	first.kill()

	gone := rec.List()[1]
	setOnlineAt(t, f.sysfsRoot(desktop.fixture), gone, false)
	exclusive := mustParse("4-7,12-15").Difference(cpuset.New(gone))
	shared := mustParse("2-3,10-11").Union(cpuset.New(gone))
	moved := testNode{fixture: desktop.fixture, config: fmt.Sprintf(`
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: %q}
  shared: {cpus: %q}
allowedNamespaces:
  exclusive: [telco]
`, exclusive, shared)}
	second := startPlugin(t, f, moved, statePath(f))
	log := second.log.String()
	holds := second.p.alloc.Holds()
	t.Logf("record %s, CPU %d offline and shared's; holds %v\n%s", rec, gone, holds, log)
	require.Len(t, holds, 1, "the hold is not dropped whole")
	assert.Equal(t, rec.Difference(cpuset.New(gone)).String(), holds[0].CPUs.String(), "the hold keeps its CPU the exclusive pool still has")
	assert.Contains(t, log, fmt.Sprintf("synchronize: stopped container telco/x/c: hold %s/c: offline CPUs %d are another pool's as now configured, not pool exclusive's", pod.Uid, gone))
}

// restartWithRecordOfflineAndShared admits an exclusive container of
// milli on epyc-2s-384 (quota-lifted: the runtime then shows it only as
// "at least 256 CPUs"; stopped: a hold), kills the plugin, takes the last
// offCount CPUs of its record offline (the runtime reports the rest, as
// cgroup v1 does), and restarts it with the config then(off), which gives
// them to the shared pool.
func restartWithRecordOfflineAndShared(t *testing.T, milli int64, quotaLifted, stopped bool, offCount int, then func(off cpuset.CPUSet) string) (*fakeRuntime, *api.Container, *runningPlugin, cpuset.CPUSet) {
	t.Helper()
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, epyc, statePath(f))
	if quotaLifted {
		f.dress = func(c *api.Container) {
			c.Linux.Resources.Cpu.Shares = api.UInt64(262144)
			c.Linux.Resources.Cpu.Quota = api.Int64(milli * 100)
		}
	}
	pod := f.runPod(podSpec{name: "g", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	g, _, err := f.createContainer(pod, "big", milli)
	require.NoError(t, err)
	if quotaLifted {
		f.mu.Lock()
		g.Linux.Resources.Cpu.Quota = api.Int64(-1) // the plugin lifted it
		f.mu.Unlock()
	}
	rec := mustParse(f.cpus(g))
	ids := rec.List()
	off := cpuset.New(ids[len(ids)-offCount:]...)
	if stopped {
		f.stopContainer(g)
	}
	require.NoError(t, first.p.Flush())
	first.kill()
	for _, cpu := range off.List() {
		setOnlineAt(t, f.sysfsRoot(epyc.fixture), cpu, false)
	}
	if !stopped {
		f.setCPUs(g, rec.Difference(off).String())
	}
	second := startPlugin(t, f, testNode{fixture: epyc.fixture, config: then(off)}, statePath(f))
	return f, g, second, off
}

// sharedTookOffline is the config of the report: the exclusive pool
// 8-191,200-339, the shared pool 340-383 (a 300-CPU record's 340-349).
func sharedTookOffline(cpuset.CPUSet) string {
	return `pools: {exclusive: {cpus: "8-191,200-339"}, shared: {cpus: "340-383"}}`
}

// A running container whose record's last CPUs are offline and, under the
// config in force since the restart, the shared pool's: they leave its
// record (held, they were its own and the shared pool's once online).
// Without them it is not its size, so it is placed anew by its request,
// as Repin places an exact-request container whose record it cannot have,
// and the log names the CPUs and why. It was "kept", its record whole
// (8-157,200-349 for the 300-CPU one, CPUs 340-349 offline and shared's).
// The quota-lifted ("at least 256 CPUs") shape of the report, and an
// exact request.
func TestARestartWithAChangedConfigTakesAnOfflineCPUAnotherPoolHasOutOfARecord(t *testing.T) {
	exactTook := func(off cpuset.CPUSet) string {
		return fmt.Sprintf(`pools: {exclusive: {cpus: %q}, shared: {cpus: %q}}`, mustParse("8-191,200-383").Difference(off), off)
	}
	for _, tc := range []struct {
		name        string
		milli       int64
		quotaLifted bool
		offCount    int
		then        func(cpuset.CPUSet) string
	}{
		{"quota lifted", 300000, true, 10, sharedTookOffline},
		{"exact request", 4000, false, 1, exactTook},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, g, second, off := restartWithRecordOfflineAndShared(t, tc.milli, tc.quotaLifted, false, tc.offCount, tc.then)
			a, ok := second.p.alloc.Get(g.GetId())
			require.True(t, ok)
			log := second.log.String()
			t.Logf("after restart: pool %s, %d CPUs (%dm) %s, runtime %s\n%s", a.Pool, a.CPUs.Size(), a.MilliCPU, a.CPUs, f.cpus(g), log)
			assert.True(t, a.CPUs.Intersection(off).IsEmpty(), "CPUs %s are the shared pool's, not its: %s", off, a.CPUs)
			assert.Equal(t, "exclusive", a.Pool)
			assert.Equal(t, int(tc.milli/1000), a.CPUs.Size(), "the CPUs the kubelet gave it")
			assert.Equal(t, tc.milli, a.MilliCPU)
			assert.True(t, a.CPUs.IsSubsetOf(second.p.alloc.Layout().Pool("exclusive")), "on its pool as now configured")
			assert.Equal(t, a.CPUs.String(), f.cpus(g), "pinned where it was placed")
			assert.Contains(t, log, fmt.Sprintf("offline CPUs %s are another pool's as now configured, not pool exclusive's", off))
			assert.NotContains(t, log, "1 containers kept")
			assert.NotContains(t, log, "confined to infra")
		})
	}
}

// The hold of the quota-lifted container, stopped: CPUs 340-349 leave
// it, the rest stays held, and the log names them.
func TestARestartWithAChangedConfigTakesAnOfflineCPUAnotherPoolHasOutOfAHold(t *testing.T) {
	_, _, second, off := restartWithRecordOfflineAndShared(t, 300000, true, true, 10, sharedTookOffline)
	require.Equal(t, "340-349", off.String())
	holds := second.p.alloc.Holds()
	log := second.log.String()
	t.Logf("holds %v\n%s", holds, log)
	require.Len(t, holds, 1)
	assert.Equal(t, "8-157,200-339", holds[0].CPUs.String())
	assert.Contains(t, log, "offline CPUs 340-349 are another pool's as now configured, not pool exclusive's; they leave the hold")
}
