package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestLostGrowOnCgroupV1DoesNotTakeAHoldsOfflineCPU: a grow
// 2->4 the file lost; cgroup v1 dropped one added CPU while it was
// offline, and it came back online (v1 does not re-add it), so the runtime
// reports 3 CPUs with a 4-CPU request. Another pod's container stopped:
// its hold has an offline CPU. A restart that took "the offline CPU nobody
// holds" as the lost one (before the holds are restored, every hold's CPU
// is nobody's) gave it to the resized container and dropped the hold
// whole; the container is pinned back instead, and the hold stays.
func TestLostGrowOnCgroupV1DoesNotTakeAHoldsOfflineCPU(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	other := f.runPod(podSpec{name: "db", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	db, _, err := f.createContainer(other, "db", 2000)
	require.NoError(t, err)
	dbCPUs := mustParse(f.cpus(db))
	f.stopContainer(db) // its pod lives: a hold
	require.NoError(t, first.p.Flush())
	_, err = f.updateContainer(pod, fwd, 4000) // the file loses this grow
	require.NoError(t, err)
	grown := mustParse(f.cpus(fwd))
	require.Equal(t, 4, grown.Size())
	first.kill()
	orig := mustParse("4,12")
	added := grown.Difference(orig).List()
	dropped := added[len(added)-1] // dropped by v1 while offline, online again
	f.setCPUs(fwd, grown.Difference(cpuset.New(dropped)).String())
	holdOff := dbCPUs.List()[0]
	setOnlineAt(t, f.sysfsRoot(desktop.fixture), holdOff, false)
	t.Logf("fwd grown to %s, runtime reports %s; db's hold %s, %d offline", grown, f.cpus(fwd), dbCPUs, holdOff)

	second := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	a, _ := second.p.alloc.Get(fwd.GetId())
	t.Logf("after restart: fwd allocator %s, holds %v", a.CPUs, second.p.alloc.Holds())
	assert.False(t, a.CPUs.Contains(holdOff), "the resized container does not take the hold's offline CPU %d", holdOff)
	held := false
	for _, h := range second.p.alloc.Holds() {
		if h.Container == "db" {
			held = true
		}
	}
	assert.True(t, held, "the stopped container's hold survives the restart")
}
