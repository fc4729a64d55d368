package plugin

import (
	"reflect"
	"testing"

	"github.com/containerd/nri/pkg/stub"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stubHandlers are every handler interface the NRI stub looks for.
var stubHandlers = []reflect.Type{
	reflect.TypeFor[stub.ConfigureInterface](),
	reflect.TypeFor[stub.SynchronizeInterface](),
	reflect.TypeFor[stub.ShutdownInterface](),
	reflect.TypeFor[stub.RunPodInterface](),
	reflect.TypeFor[stub.UpdatePodInterface](),
	reflect.TypeFor[stub.StopPodInterface](),
	reflect.TypeFor[stub.RemovePodInterface](),
	reflect.TypeFor[stub.PostUpdatePodInterface](),
	reflect.TypeFor[stub.CreateContainerInterface](),
	reflect.TypeFor[stub.StartContainerInterface](),
	reflect.TypeFor[stub.UpdateContainerInterface](),
	reflect.TypeFor[stub.StopContainerInterface](),
	reflect.TypeFor[stub.RemoveContainerInterface](),
	reflect.TypeFor[stub.PostCreateContainerInterface](),
	reflect.TypeFor[stub.PostStartContainerInterface](),
	reflect.TypeFor[stub.PostUpdateContainerInterface](),
	reflect.TypeFor[stub.ValidateContainerAdjustmentInterface](),
}

// TestInstrumentedHandlersMatchPlugin: the stub subscribes to what the value
// it serves implements, so a handler added to *Plugin but not to the timing
// wrapper would silently never be called.
func TestInstrumentedHandlersMatchPlugin(t *testing.T) {
	plugin, wrapper := reflect.TypeFor[*Plugin](), reflect.TypeFor[instrumented]()
	for _, iface := range stubHandlers {
		assert.Equal(t, plugin.Implements(iface), wrapper.Implements(iface), "%s: *Plugin and instrumented must agree", iface.Name())
	}
}

// TestHandlerLatencyMetrics: every handler the runtime calls is timed.
func TestHandlerLatencyMetrics(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "timed", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	f.removePod(pod)

	reg := rp.p.Registry()
	families, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]uint64{}
	for _, mf := range families {
		if mf.GetName() != "cpupool_handler_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	for _, h := range []string{"Configure", "Synchronize", "RunPodSandbox", "CreateContainer", "StopContainer", "RemoveContainer", "RemovePodSandbox"} {
		assert.GreaterOrEqual(t, counts[h], uint64(1), "handler %s timed", h)
	}
	n, err := testutil.GatherAndCount(reg, "cpupool_handler_duration_seconds")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 7)
}

// TestStateWriteLatencyMetrics: the background writer times its writes and
// fsyncs, so operators see a slow disk without it touching the replies.
func TestStateWriteLatencyMetrics(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "w", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	require.NoError(t, rp.p.Flush()) // writes and fsyncs what changed

	families, err := rp.p.Registry().Gather()
	require.NoError(t, err)
	counts := map[string]uint64{}
	for _, mf := range families {
		if mf.GetName() == "cpupool_state_write_duration_seconds" {
			for _, m := range mf.GetMetric() {
				counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	assert.GreaterOrEqual(t, counts["write"], uint64(1), "writes timed")
	assert.GreaterOrEqual(t, counts["sync"], uint64(1), "fsyncs timed")
}
