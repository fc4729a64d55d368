package plugin

import (
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What a push sends depends on the CPUs online (runnable), so its
// staleness check compares what it sent with what would be sent now, not
// the record. A push built while CPU 12 was offline ("4") that the runtime
// applies after the giveBack push of 12 coming online ("4,12") has the
// same record: taken as current, the container would stay on "4" for good
// (on cgroup v2 too: the runtime wrote "4"), and pending cleared, so no
// reply would repair it. It must be sent again.
func TestPushBuiltWhileCPUOfflineIsResent(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	setOnline(t, rp, 12, false)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rp.p.metrics.offlineHeld) == 1 }, 3*time.Second, 5*time.Millisecond)

	second, first := make(chan struct{}), make(chan struct{})
	calls := 0
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	apply := func(u []*api.ContainerUpdate) {
		f.mu.Lock()
		f.apply(u)
		f.mu.Unlock()
	}
	rp.p.setPush(func(u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		<-mu
		calls++
		n := calls
		mu <- struct{}{}
		if n == 1 {
			// The first push (built while 12 is offline) is slow to
			// reach the runtime; 12 comes online meanwhile.
			setOnline(t, rp, 12, true)
			select {
			case <-second:
			case <-time.After(3 * time.Second):
			}
		} else if n == 2 {
			defer close(second)
		}
		apply(u)
		if n == 1 {
			close(first)
		}
		return nil, nil
	})
	rp.p.mu.Lock()
	rp.p.pending[fwd.Id] = true
	rp.p.pushLater([]string{fwd.Id})
	rp.p.mu.Unlock()
	<-first
	time.Sleep(200 * time.Millisecond) // a resend, if any, arrives meanwhile
	assert.Eventually(t, func() bool { return f.cpus(fwd) == "4,12" }, 2*time.Second, 10*time.Millisecond, "fwd runs on %s", f.cpus(fwd))
}
