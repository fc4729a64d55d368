package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A grant kept for a pod the runtime does not run (deleted while the daemon
// was down, so no RemovePodSandbox came) holds no CPU: its CPUs are not
// "the kubelet's" for Devices and Grant. A container the kubelet did not
// allocate them to (here: an annotated exclusive container placed while the
// device plugin was off) holds them meanwhile: they must stay unhealthy and
// be refused by Grant, or the kubelet allocates them and the new pod's
// container is refused for as long as the holder runs.
func TestKeptGrantOfAnAbsentPodDoesNotHideANonKubeletHolder(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, first.p, "6", "14")
	podA := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	_, _, err := f.createWithEnv(podA, "app", 0, env)
	require.NoError(t, err)
	first.stop()
	f.removePodQuietly(podA) // deleted while the daemon was down

	// The device plugin is turned off for a while; an annotated exclusive
	// container takes the whole exclusive pool.
	second := startPlugin(t, f, desktop, statePath(f))
	x := f.runPod(podSpec{name: "x", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	xc, _, err := f.createContainer(x, "c", 8000)
	require.NoError(t, err)
	require.Equal(t, "4-7,12-15", f.cpus(xc))
	second.stop()

	third := startPlugin(t, f, desktopKubelet, statePath(f))
	require.Equal(t, "4-7,12-15", f.cpus(xc))
	assert.Equal(t, "!4@0 !5@0 !6@0 !7@0 !12@0 !13@0 !14@0 !15@0", healthOf(third.p.Devices()), "every exclusive CPU is held by x, which the kubelet did not allocate them to")
	_, err = third.p.Grant([]string{"6"})
	assert.Error(t, err, "CPU 6 is held by x")
}

// removePodQuietly deletes a pod and its containers from the runtime
// without telling the plugin (it is down).
func (f *fakeRuntime) removePodQuietly(pod *api.PodSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, pod.Id)
	for id, c := range f.ctrs {
		if c.PodSandboxId == pod.Id {
			delete(f.ctrs, id)
		}
	}
}
