package plugin

import (
	"fmt"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// A RUNNING container of the kubelet's devices (CPUs 6,14); while the
// plugin is down CPU 14 goes offline and the config gives it to the shared
// pool. The kubelet's checkpoint still says 6,14 for the pod's life, as for
// the stopped container's hold (which keeps CPU 14). The running container
// must not be moved off CPU 6, the kubelet's CPU still in its pool, nor
// confined to infra: its request is the kubelet's allocation, which
// placeExact refuses for the offline CPU 14 unless the pod holds it.
func TestARunningKubeletDevicesContainerIsNotConfinedWhenARestartGaveItsOfflineCPUToAnotherPool(t *testing.T) {
	for _, runsOn := range []string{"6", "6,14"} { // cgroup v1 drops 14; v2 keeps it listed
		t.Run("runs on "+runsOn, func(t *testing.T) {
			f, ctr, second := restartRunningKubeletDevicesWithCPU14Shared(t, runsOn)
			a, ok := second.p.alloc.Get(ctr.GetId())
			require.True(t, ok)
			log := second.log.String()
			t.Logf("after restart: pool %s CPUs %s, runtime %s\n%s", a.Pool, a.CPUs, f.cpus(ctr), log)
			assert.NotContains(t, log, "confined to infra")
			assert.Equal(t, "exclusive", a.Pool, "the kubelet's CPU 6 is still the exclusive pool's")
			assert.Contains(t, f.cpus(ctr), "6", "not moved off the kubelet's CPU it runs on")
			assert.Equal(t, "6,14", a.CPUs.String(), "the record keeps the kubelet's offline CPU, as its hold would")
			assert.Contains(t, log, "offline CPU 14 is pool shared's as now configured, not pool exclusive's, but the pod's allocation (device-plugin")
		})
	}
}

// kubeletCPU14Shared is the config the kubelet-devices restart tests
// (running and stopped containers) restart under: CPU 14, which the
// kubelet's devices gave a container on desktopKubelet, is the shared
// pool's, as a config changed while the plugin was down says.
var kubeletCPU14Shared = testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-13,15"}
  shared: {cpus: "2-3,10-11,14"}
allowedNamespaces:
  exclusive: [telco]
kubelet: {devicePlugin: true}
`}

// restartRunningKubeletDevicesWithCPU14Shared runs container
// telco/dpdk/app on the kubelet's devices CPUs 6,14 (desktopKubelet),
// kills the plugin, takes CPU 14 offline, has the runtime run the
// container on runsOn (cgroup v1 drops an offline CPU; a hand moves it)
// and starts the plugin again under kubeletCPU14Shared.
func restartRunningKubeletDevicesWithCPU14Shared(t *testing.T, runsOn string) (*fakeRuntime, *api.Container, *runningPlugin) {
	t.Helper()
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, first.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	ctr, resp, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	require.NoError(t, first.p.Flush())
	first.kill()

	setOnlineAt(t, f.sysfsRoot(desktop.fixture), 14, false)
	f.setCPUs(ctr, runsOn)
	return f, ctr, startPlugin(t, f, kubeletCPU14Shared, statePath(f))
}

// The same for a RUNNING container of a DRA claim: the claim's CPUs are
// fixed while it is prepared (the CDI spec's token), so the record whose
// CPU went offline and that the restart's config gives the shared pool is
// one the kubelet decides (kubeletDecides: dra-claim). It must keep that
// CPU with the same warning as the device-plugin case, stay in its pool on
// the claim's online CPU, and not be confined to infra.
func TestARunningDRAClaimContainerIsNotConfinedWhenARestartGaveItsOfflineCPUToAnotherPool(t *testing.T) {
	dramDesktop := testNode{fixture: desktop.fixture, config: desktop.config + "dra: {enabled: true}\n"}
	for _, shape := range []string{"v1", "v2"} { // cgroup v1 drops the offline CPU; v2 keeps it listed
		t.Run("cgroup "+shape, func(t *testing.T) {
			f := newFakeRuntime(t, false)
			first := startDRAOn(t, f, dramDesktop)
			pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
			env := first.prepare(t, "uid-1", 0, 2, pod)
			cpus := mustParse(first.claimCPUs(t, "uid-1"))
			require.Equal(t, 2, cpus.Size())
			ctr, resp, err := f.createWithEnv(pod, "fwd", 10, env...)
			require.NoError(t, err)
			require.Equal(t, cpus.String(), resp.Adjust.Linux.Resources.Cpu.Cpus)
			require.NoError(t, first.p.Flush())
			first.kill()

			ids := cpus.List()
			off, on := ids[1], ids[0]
			setOnlineAt(t, f.sysfsRoot(desktop.fixture), off, false)
			runsOn := fmt.Sprint(on)
			if shape == "v2" {
				runsOn = cpus.String()
			}
			f.setCPUs(ctr, runsOn)
			exclusive := mustParse("4-7,12-15").Difference(cpuset.New(off))
			shared := mustParse("2-3,10-11").Union(cpuset.New(off))
			moved := testNode{fixture: desktop.fixture, config: fmt.Sprintf(`
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "%s"}
  shared: {cpus: "%s"}
allowedNamespaces:
  exclusive: [telco]
dra: {enabled: true}
`, exclusive, shared)}
			second := startDRAOn(t, f, moved)
			a, ok := second.p.alloc.Get(ctr.GetId())
			require.True(t, ok)
			log := second.log.String()
			t.Logf("claim CPUs %s, runs on %s; after restart: pool %s CPUs %s, runtime %s\n%s", cpus, runsOn, a.Pool, a.CPUs, f.cpus(ctr), log)
			assert.NotContains(t, log, "confined to infra")
			assert.Equal(t, "exclusive", a.Pool, "the claim's online CPU is still the exclusive pool's")
			assert.Contains(t, f.cpus(ctr), fmt.Sprint(on), "not moved off the claim's CPU it runs on")
			assert.Equal(t, cpus.String(), a.CPUs.String(), "the record keeps the claim's offline CPU, as its hold would")
			assert.Contains(t, log, fmt.Sprintf("offline CPU %d is pool shared's as now configured, not pool exclusive's, but the pod's allocation (dra-claim: ", off))
		})
	}
}
