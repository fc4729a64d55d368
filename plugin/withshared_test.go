package plugin

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
)

// TestExclusiveWithSharedCPUs, over the real NRI protocol: a container
// that asks for the shared pool too runs on its exclusive CPUs and the
// shared pool, is told which is which, has no CFS quota; its exclusive
// part grows by a resize, is held when it stops, and never moves; its
// shared part follows the pool when the plugin comes back with another
// one, and a plugin that lost its state finds the exclusive part where it
// runs.
func TestExclusiveWithSharedCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev/container.fwd": "true"}})
	fwd, resp, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	env := envOf(resp)
	excl := cpusOf(t, f, env[EnvExclusiveCPUs])
	require.Equal(t, 2, excl.Size())
	assert.True(t, excl.IsSubsetOf(mustParse("4-7,12-15")))
	assert.Equal(t, "2-3,10-11", env[EnvSharedCPUs])
	assert.Equal(t, excl.Union(mustParse("2-3,10-11")).String(), env[EnvCPUs])
	assert.Equal(t, env[EnvCPUs], f.cpus(fwd), "the cpuset is both")
	assert.Equal(t, "exclusive", env[EnvPool])
	q, set := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.True(t, set)
	assert.Equal(t, int64(-1), q)
	ctl, resp, err := f.createContainer(pod, "ctl", 1000)
	require.NoError(t, err)
	assert.NotContains(t, envOf(resp), EnvSharedCPUs, "only the container that asked")
	assert.Equal(t, 1, cpusOf(t, f, f.cpus(ctl)).Size())
	assert.Equal(t, 5, usageOf(rp.p, "exclusive").Free, "the exclusive parts only")

	up, err := f.updateContainer(pod, fwd, 3000)
	require.NoError(t, err)
	grown := cpusOf(t, f, f.cpus(fwd)).Difference(mustParse("2-3,10-11"))
	assert.Equal(t, 3, grown.Size())
	assert.True(t, excl.IsSubsetOf(grown))
	assert.Equal(t, grown.Union(mustParse("2-3,10-11")).String(), updateFor(up, fwd.Id).GetLinux().GetResources().GetCpu().GetCpus())
	st := rp.savedState(t)
	assert.Equal(t, grown.String(), st.Containers[fwd.Id].CPUs)
	assert.True(t, st.Containers[fwd.Id].WithShared)
	assert.Equal(t, "2-3,10-11", st.Containers[fwd.Id].SharedCPUs)

	// The plugin comes back with a smaller shared pool: the shared part
	// follows it, the exclusive part stays.
	rp.stop()
	smaller := testNode{fixture: desktop.fixture, config: strings.Replace(desktop.config, `shared: {cpus: "2-3,10-11"}`, `shared: {cpus: "2-3"}`, 1)}
	rp = startPlugin(t, f, smaller, statePath(f))
	assert.Equal(t, grown.Union(mustParse("2-3")).String(), f.cpus(fwd))

	// It loses its state: the runtime's cpuset says where the exclusive
	// part is.
	rp.kill()
	require.NoError(t, os.Remove(statePath(f)))
	rp = startPlugin(t, f, smaller, statePath(f))
	assert.Equal(t, grown.Union(mustParse("2-3")).String(), f.cpus(fwd))
	assert.Equal(t, 8-4, usageOf(rp.p, "exclusive").Free, "its 3 exclusive CPUs and ctl's are held")

	f.exitContainer(fwd, 1)
	assert.Equal(t, map[string]string{"uid-dpdk/fwd": grown.String()}, holdsOf(rp.p), "the exclusive part is held for the pod")
	again, resp, err := f.createAttempt(pod, "fwd", 1, 3000)
	require.NoError(t, err)
	assert.Equal(t, grown.Union(mustParse("2-3")).String(), f.cpus(again), "the next run: its exclusive CPUs and the shared pool")
	assert.Equal(t, grown.String(), envOf(resp)[EnvExclusiveCPUs])
}

// TestConfigChangeKeepsTheSharedCPUsContainersExclusivePart (issue 30,
// defect 4): the plugin comes back with a config that hands a shared-cpus
// container's exclusive CPUs to the shared pool. Like a plain exclusive
// container it is kept where it runs, and the log says so: its exclusive
// part does not move, and no shared member is put on it.
func TestConfigChangeKeepsTheSharedCPUsContainersExclusivePart(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	fwd, resp, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	excl := cpusOf(t, f, envOf(resp)[EnvExclusiveCPUs])
	require.Equal(t, 2, excl.Size())
	web := f.runPod(podSpec{name: "web", namespace: "web", annotations: map[string]string{"pool.cpupool.dev": "shared"}})
	member, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	require.Equal(t, "2-3,10-11", f.cpus(member))
	rp.stop()

	handed := testNode{fixture: desktop.fixture, config: strings.NewReplacer(
		`exclusive: {cpus: "4-7,12-15"}`, `exclusive: {cpus: "`+mustParse("4-7,12-15").Difference(excl).String()+`"}`,
		`shared: {cpus: "2-3,10-11"}`, `shared: {cpus: "`+mustParse("2-3,10-11").Union(excl).String()+`"}`).Replace(desktop.config)}
	require.NotEqual(t, desktop.config, handed.config)
	rp = startPlugin(t, f, handed, statePath(f))
	assert.Equal(t, excl.Union(mustParse("2-3,10-11")).String(), f.cpus(fwd), "the exclusive part never moves")
	assert.Contains(t, rp.log.String(), "CPUs "+excl.String()+" are outside pool exclusive")
	assert.Equal(t, "2-3,10-11", f.cpus(member), "no shared member runs on its exclusive CPUs")
	st := rp.savedState(t).Containers[fwd.Id]
	assert.Equal(t, excl.String(), st.CPUs)
	assert.Equal(t, "2-3,10-11", st.SharedCPUs)
}

// TestWithSharedRefused: a namespace the shared pool does not admit, or a
// container that keeps its quota, is refused with the reason; nothing is
// placed.
func TestWithSharedRefused(t *testing.T) {
	f := newFakeRuntime(t, false)
	node := testNode{fixture: desktop.fixture, config: desktop.config + "  shared: [web]\n"}
	rp := startPlugin(t, f, node, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	_, _, err := f.createContainer(pod, "fwd", 2000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `nri-cpupool: container telco/dpdk/fwd: annotation shared-cpus.cpupool.dev="true": namespace "telco" may not use pool shared (allowedNamespaces.shared: [web])`)
	assert.Equal(t, 8, usageOf(rp.p, "exclusive").Free)
}

// TestWithSharedOnTheResourceRoute: a container of cpupool.dev/exclusive
// gets the kubelet's CPUs plus the shared pool; the kubelet's devices
// stay the exclusive part.
func TestWithSharedOnTheResourceRoute(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, rp.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort", annotations: map[string]string{"shared-cpus.cpupool.dev": "true"}})
	_, resp, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	assert.Equal(t, "2-3,6,10-11,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	assert.Equal(t, "6,14", envOf(resp)[EnvExclusiveCPUs])
	assert.Equal(t, "2-3,10-11", envOf(resp)[EnvSharedCPUs])
	assert.Equal(t, "4@0 5@0 6@0 7@0 12@0 13@0 14@0 15@0", healthOf(rp.p.Devices()))
}

// optOutDesktop makes every exclusive container's cgroup an isolated
// partition unless it declines.
var optOutDesktop = testNode{fixture: desktop.fixture, config: strings.Replace(partitionedDesktop.config, "isolatedPartition: optIn", "isolatedPartition: optOut", 1)}

// TestSharedCPUsContainerIsNoPartition (issue 30, defect 3): the kernel
// runs a valid partition root's threads only on its exclusive CPUs, so a
// container that also runs on the shared pool is never made one. Where the
// pool partitions every container (optOut), it runs without, with its
// whole cpuset, and a warning and cpupool_isolated_partitions_skipped_total
// say so; a container that asks for both is refused, naming both
// annotations. A plain exclusive container still gets its partition.
func TestSharedCPUsContainerIsNoPartition(t *testing.T) {
	f := newFakeRuntime(t, true)
	require.NotEqual(t, partitionedDesktop.config, optOutDesktop.config)
	rp := startPlugin(t, f, optOutDesktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev/container.fwd": "true"}})
	fwd, resp, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	excl := cpusOf(t, f, envOf(resp)[EnvExclusiveCPUs])
	loop, _, err := f.createContainer(pod, "loop", 1000)
	require.NoError(t, err)
	fwdDir, loopDir := runcCreates(t, f, fwd), runcCreates(t, f, loop)
	require.NoError(t, rp.p.FlushIsolation())

	assert.Equal(t, excl.Union(mustParse("2-3,10-11")).String(), f.cpus(fwd), "the exclusive part and the shared pool")
	assert.Equal(t, "member", cgroupFile(t, f, fwdDir, "cpuset.cpus.partition"), "no partition: it would lose the shared pool")
	assert.Equal(t, "", cgroupFile(t, f, fwdDir, "cpuset.cpus.exclusive"))
	assert.Equal(t, "isolated", cgroupFile(t, f, loopDir, "cpuset.cpus.partition"), "the pool's default for the others")
	assert.Equal(t, f.cpus(loop), cgroupFile(t, f, "/kubepods", "cpuset.cpus.exclusive"), "only the plain container's CPUs")
	assert.Contains(t, rp.log.String(), "container telco/dpdk/fwd: not in an isolated partition, which pools.exclusive.isolatedPartition: optOut gives, because it also runs on the shared pool (shared-cpus.cpupool.dev)")
	assert.NotContains(t, rp.log.String(), "container telco/dpdk/loop: not in an isolated partition")
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_isolated_partitions_skipped_total Exclusive containers placed without the isolated partition their pool gives by default (isolatedPartition: optOut), by reason (shared-cpus: they run on the shared pool too, which a partition would take from them).
# TYPE cpupool_isolated_partitions_skipped_total counter
cpupool_isolated_partitions_skipped_total{reason="shared-cpus"} 1
`), "cpupool_isolated_partitions_skipped_total"))
	st := rp.savedState(t).Containers[fwd.Id]
	assert.False(t, st.IsolatedPartition, "the state, and status, say it has none")
	assert.True(t, st.WithShared)

	both := f.runPod(podSpec{name: "both", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true", "isolated-partition.cpupool.dev": "true"}})
	free := usageOf(rp.p, "exclusive").Free
	_, _, err = f.createContainer(both, "fwd", 1000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `nri-cpupool: container telco/both/fwd: annotation isolated-partition.cpupool.dev="true": the kernel runs an isolated partition's threads only on its exclusive CPUs, so the container would lose the shared pool that shared-cpus.cpupool.dev="true" adds to them; choose one: remove one of the two annotations, or set isolated-partition.cpupool.dev/container.fwd: "false"`)
	assert.Equal(t, free, usageOf(rp.p, "exclusive").Free, "nothing placed")

	// A plugin that lost its state adopts it as it runs, and says so again.
	rp.kill()
	require.NoError(t, os.Remove(statePath(f)))
	rp = startPlugin(t, f, optOutDesktop, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, excl.Union(mustParse("2-3,10-11")).String(), f.cpus(fwd))
	assert.Equal(t, "member", cgroupFile(t, f, fwdDir, "cpuset.cpus.partition"))
	assert.Equal(t, "isolated", cgroupFile(t, f, loopDir, "cpuset.cpus.partition"))
	assert.Contains(t, rp.log.String(), "container telco/dpdk/fwd: not in an isolated partition, which pools.exclusive.isolatedPartition: optOut gives")
	assert.Equal(t, 1.0, testutil.ToFloat64(rp.p.metrics.partitionsSkipped.WithLabelValues("shared-cpus")))
}

// TestSharedCPUsContainerPartitionedByAnEarlierRelease (issue 30, defect
// 3): a running container that an earlier release made a partition
// although it runs on the shared pool too is no longer one after the
// restart: its cgroup and its ancestors get their files back, and its
// threads the shared pool.
func TestSharedCPUsContainerPartitionedByAnEarlierRelease(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, partitionedDesktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "isolated-partition.cpupool.dev": "true"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	dir := runcCreates(t, f, fwd)
	require.NoError(t, rp.p.FlushIsolation())
	require.Equal(t, "isolated", cgroupFile(t, f, dir, "cpuset.cpus.partition"))
	excl := f.cpus(fwd)
	st := rp.savedState(t)
	rp.kill()

	// What the earlier release recorded and had the runtime apply for a
	// container with shared-cpus.cpupool.dev and a partition.
	rec := st.Containers[fwd.Id]
	rec.WithShared, rec.SharedCPUs, rec.NoCPUQuota = true, "2-3,10-11", true
	st.Containers[fwd.Id] = rec
	require.NoError(t, state.NewFileStore(statePath(f)).Save(st))
	f.setCPUs(fwd, mustParse(excl).Union(mustParse("2-3,10-11")).String())

	rp = startPlugin(t, f, partitionedDesktop, statePath(f))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, "member", cgroupFile(t, f, dir, "cpuset.cpus.partition"), "restored")
	assert.Equal(t, "", cgroupFile(t, f, dir, "cpuset.cpus.exclusive"))
	assert.Equal(t, "", cgroupFile(t, f, "/kubepods", "cpuset.cpus.exclusive"))
	assert.Equal(t, mustParse(excl).Union(mustParse("2-3,10-11")).String(), f.cpus(fwd), "kept where it runs")
	assert.Contains(t, rp.log.String(), "container telco/dpdk/fwd: its cgroup is no longer an isolated partition: it runs on the shared pool too (shared-cpus.cpupool.dev)")
	assert.False(t, rp.savedState(t).Containers[fwd.Id].IsolatedPartition)
}

// TestKill9AfterSharedPartToInfraKeepsTheExclusivePart: a shared-cpus
// container on 4,12 is kept where it runs by a restart whose config makes
// 4,12 the whole shared pool; its shared part goes to infra and the
// runtime applies it; the plugin is killed before the background writer
// records it (played by putting back the file as it was). The next
// restart, with the same config, keeps its exclusive part where it runs.
func TestKill9AfterSharedPartToInfraKeepsTheExclusivePart(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	dpdk, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	require.Equal(t, "2-4,10-12", f.cpus(dpdk))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := state.ReadState(statePath(f))
		require.NoError(c, err)
		assert.Contains(c, st.Containers, dpdk.Id)
	}, 5*time.Second, 5*time.Millisecond)
	first.stop()
	saved, err := os.ReadFile(statePath(f))
	require.NoError(t, err)

	moved := testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "2-3,5-7,10-11,13-15"}
  shared: {cpus: "4,12"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`}
	second := startPlugin(t, f, moved, statePath(f))
	require.Equal(t, "0-1,4,8-9,12", f.cpus(dpdk), "kept on 4,12, its shared part on infra")
	second.stop()
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded restart #1")

	third := startPlugin(t, f, moved, statePath(f))
	assert.Equal(t, "0-1,4,8-9,12", f.cpus(dpdk), "a restart with the same config moves nobody:\n%s", third.log.String())
}
