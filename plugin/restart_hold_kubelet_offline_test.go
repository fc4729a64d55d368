package plugin

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// A container of the kubelet's devices (CPUs 6,14) stops; while the plugin
// is down CPU 14 goes offline and the config gives it to the shared pool.
// The kubelet restarts the container with its cached Allocate response,
// CPUs 6,14 again, and does so for the pod's life. Had the restart's hold
// let CPU 14 go (as it does for a hold the plugin placed), the creation
// would be refused at every retry ("given CPU 14 by the kubelet, which is
// not online", once online "outside the pool"). The hold keeps CPU 14, the
// log says the conflict and how to end it, and the container starts on
// CPU 6, holding the offline CPU 14 (placeExact).
func TestAKubeletDevicesContainerRestartsAfterARestartThatGaveItsOfflineCPUToAnotherPool(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, first.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	ctr, resp, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	f.stopContainer(ctr)
	require.NoError(t, first.p.Flush())
	first.kill()

	setOnlineAt(t, f.sysfsRoot(desktop.fixture), 14, false)
	second := startPlugin(t, f, kubeletCPU14Shared, statePath(f))
	t.Logf("holds after restart: %v\n%s", second.p.alloc.Holds(), second.log.String())
	assert.Contains(t, second.log.String(), "synchronize: stopped container telco/dpdk/app: hold ")
	assert.Contains(t, second.log.String(), ": offline CPU 14 is pool shared's as now configured, not pool exclusive's, but the pod's allocation (device-plugin: ")
	f.removeContainer(ctr)
	_, resp, err = f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err, "the kubelet's devices are those of the pod's own hold")
	assert.Equal(t, "6", resp.Adjust.Linux.Resources.Cpu.Cpus)
}

// The same for a container of a DRA claim: the claim's CPUs are fixed
// while it is prepared, and the container's restart (the CDI spec's
// token) comes with them again. The claim's CPU that went offline and
// that the restart's config gives the shared pool stays held for the
// stopped container, the log says why, and the container starts again on
// the claim's online CPUs.
func TestADRAClaimContainerRestartsAfterARestartThatGaveItsOfflineCPUToAnotherPool(t *testing.T) {
	dramDesktop := testNode{fixture: desktop.fixture, config: desktop.config + "dra: {enabled: true}\n"}
	f := newFakeRuntime(t, false)
	first := startDRAOn(t, f, dramDesktop)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	env := first.prepare(t, "uid-1", 0, 2, pod)
	cpus := mustParse(first.claimCPUs(t, "uid-1"))
	require.Equal(t, 2, cpus.Size())
	ctr, resp, err := f.createWithEnv(pod, "fwd", 10, env...)
	require.NoError(t, err)
	require.Equal(t, cpus.String(), resp.Adjust.Linux.Resources.Cpu.Cpus)
	f.stopContainer(ctr)
	require.NoError(t, first.p.Flush())
	first.kill()

	ids := cpus.List()
	off, on := ids[1], ids[0]
	setOnlineAt(t, f.sysfsRoot(desktop.fixture), off, false)
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
	log := second.log.String()
	t.Logf("holds after restart: %v\n%s", second.p.alloc.Holds(), log)
	assert.Contains(t, log, fmt.Sprintf(": offline CPU %d is pool shared's as now configured, not pool exclusive's, but the pod's allocation (dra-claim: ", off))
	f.removeContainer(ctr)
	_, resp, err = f.createWithEnv(pod, "fwd", 10, env...)
	require.NoError(t, err, "the claim's CPUs are those of the pod's own hold")
	assert.Equal(t, fmt.Sprint(on), resp.Adjust.Linux.Resources.Cpu.Cpus)
}
