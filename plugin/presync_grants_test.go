package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPresyncKeepsGrantedCPUsHealthy: before the first Synchronize the
// CPUs the grants file records (the kubelet's own allocation, known
// before the runtime reports anything) stay healthy. The kubelet's device
// manager re-admits a pod whose container does not run (node reboot,
// kubelet restart) through devicesToAllocate, which fails when a
// previously allocated device is not healthy ("previously allocated
// devices are no longer healthy"): UnexpectedAdmissionError, and the pod
// is not retried. Every other CPU stays unhealthy, and Grant still
// refuses, until the runtime has said which containers hold CPUs.
func TestPresyncKeepsGrantedCPUsHealthy(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, first.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	_, _, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	require.NoError(t, first.p.Flush())
	first.stop()

	var before string
	var grantErr error
	startPluginWith(t, f, desktopKubelet, statePath(f), func(rp *runningPlugin) {
		before = healthOf(rp.p.Devices())
		_, grantErr = rp.p.Grant([]string{"6"})
	})
	assert.Equal(t, "!4@0 !5@0 6@0 !7@0 !12@0 !13@0 14@0 !15@0", before,
		"before Synchronize only the kubelet's own allocated CPUs 6,14 are healthy: unhealthy ones fail their pod's re-admission ('previously allocated devices are no longer healthy')")
	require.Error(t, grantErr, "Grant must still refuse before Synchronize")
	assert.Contains(t, grantErr.Error(), "has not synchronized")
}
