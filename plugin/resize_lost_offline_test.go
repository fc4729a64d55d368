package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestLostGrowWithAnOfflineCPUIsKeptOnCgroupV2: a grow 2->4 the file lost,
// then one of the new CPUs goes offline while the plugin is away; cgroup v2 keeps
// the offline CPU in cpuset.cpus and the runtime reports the whole grown
// set. ReadmitResized handed an offline CPU (no core in the index) to
// returnOrder, and Synchronize panicked: index out of range.
// It keeps the 4 CPUs, the offline one held offline.
func TestLostGrowWithAnOfflineCPUIsKeptOnCgroupV2(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, first.p.Flush())
	_, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	grown := mustParse(f.cpus(fwd))
	require.Equal(t, 4, grown.Size())
	first.kill()
	added := grown.Difference(cpuset.New(4, 12)).List()
	setOnlineAt(t, f.sysfsRoot(desktop.fixture), added[len(added)-1], false)

	second := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	a, _ := second.p.alloc.Get(fwd.GetId())
	t.Logf("after restart: allocator %s (%dm), runtime %s", a.CPUs, a.MilliCPU, f.cpus(fwd))
	assert.Equal(t, 4, a.CPUs.Size(), "keeps the 4 CPUs it runs on (one held offline)")
	assert.NotEqual(t, "4,12", f.cpus(fwd), "not shrunk back to the record's CPUs")
}
