package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Finding 1: one annotation stalled the daemon under its lock; the runtime
// then timed out, dropped the plugin and created every later container
// unpinned. Now a hostile annotation is refused at once, with a short error,
// and the next container is pinned on the same connection.
func TestHostileAnnotationCannotStallThePlugin(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	syncs := f.syncCount()
	hostile := []map[string]string{
		{"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": "0-9223372036854775807"},
		{"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": "0-3000000"},
		{"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": strings.Repeat("0,", 100000) + "0"}, // Kubernetes caps a pod's annotations at 256 KiB,
		{"pool.cpupool.dev": "exclusive", "device.cpupool.dev": strings.Repeat("/sys/class/net/x,", 1000)},
		{"pool.cpupool.dev/container." + strings.Repeat("c", 100000): "exclusive"},
	}
	for i, ann := range hostile {
		pod := f.runPod(podSpec{name: "evil" + id(i), namespace: "telco", annotations: ann})
		start := time.Now()
		_, _, err := f.createContainer(pod, "c", 1000)
		require.Error(t, err)
		assert.Less(t, time.Since(start), 2*time.Second, "hang guard: the runtime's timeout is 2 s")
		assert.Less(t, len(err.Error()), 600, "the error repeats the whole value: %.200s", err.Error())
		assert.Contains(t, err.Error(), "nri-cpupool")
	}
	pod := f.runPod(podSpec{name: "good", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	assert.Equal(t, "4,12", f.cpus(ctr), "the plugin is still connected and pins")
	assert.Equal(t, syncs, f.syncCount(), "the runtime never dropped the plugin")
	assert.Less(t, len(rp.log.String()), 20000, "the log repeats hostile values")
}
