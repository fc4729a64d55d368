package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The start check (startrace.go) compares the cgroup with what the
// container was sent, the runnable set (its record less the offline CPUs),
// as Synchronize sends it: a created container pinned exactly as sent is
// not "started on CPUs not its", not a start repin, and its cgroup is not
// written with the offline CPU (EINVAL on cgroup v1, every 100 ms for
// 30 s).
func TestStartCheckAcceptsTheRunnableSet(t *testing.T) {
	f := newFakeRuntime(t, true)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "2-4,10-12", f.cpus(fwd))
	first.stop()
	setOnlineAt(t, f.sysfsRoot(desktop.fixture), 12, false)
	// Listed as created (its task is being made), on what v1 left it.
	f.mu.Lock()
	fwd.State = api.ContainerState_CONTAINER_CREATED
	f.mu.Unlock()
	f.setCPUs(fwd, "4")
	f.mkCgroup(fwd.Linux.CgroupsPath)
	cpusFile := filepath.Join(f.hierarchy(), fwd.Linux.CgroupsPath, "cpuset.cpus")

	second := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	require.Equal(t, "2-4,10-11", f.cpus(fwd), "Synchronize sends the runnable set")
	// The task's cgroup gets what was sent.
	require.NoError(t, os.WriteFile(cpusFile, []byte("2-4,10-11\n"), 0o644))
	time.Sleep(time.Second)
	b, _ := os.ReadFile(cpusFile)
	assert.Equal(t, "2-4,10-11", strings.TrimSpace(string(b)), "the start check rewrote the cgroup with offline CPU 12")
	assert.Equal(t, 0.0, testutil.ToFloat64(second.p.metrics.startRepins), "counted as a start repin")
	assert.NotContains(t, second.log.String(), "started on CPUs")
}
