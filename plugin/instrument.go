package plugin

import (
	"context"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/prometheus/client_golang/prometheus"
)

// handlerSeconds is the latency histogram of the NRI handlers: the time the
// plugin takes between the runtime's request and its reply (lock waits
// included), by handler. Buckets from 10 µs to about 1.5 s: decisions take
// microseconds, and the runtime gives up after 2 s.
func newHandlerSeconds() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cpupool_handler_duration_seconds",
		Help:    "Time from an NRI request to the plugin's reply, by handler.",
		Buckets: prometheus.ExponentialBuckets(10e-6, 2.5, 14),
	}, []string{"handler"})
}

// instrumented serves the NRI stub on the plugin's behalf and times every
// handler. It implements exactly the handler interfaces *Plugin does
// (TestInstrumentedHandlersMatchPlugin keeps them in step), since the stub
// subscribes to the events whose interfaces its plugin value implements.
type instrumented struct {
	p       *Plugin
	seconds *prometheus.HistogramVec
}

var (
	_ stub.ConfigureInterface       = instrumented{}
	_ stub.SynchronizeInterface     = instrumented{}
	_ stub.ShutdownInterface        = instrumented{}
	_ stub.RunPodInterface          = instrumented{}
	_ stub.StopPodInterface         = instrumented{}
	_ stub.RemovePodInterface       = instrumented{}
	_ stub.CreateContainerInterface = instrumented{}
	_ stub.UpdateContainerInterface = instrumented{}
	_ stub.StopContainerInterface   = instrumented{}
	_ stub.RemoveContainerInterface = instrumented{}

	_ stub.PostStartContainerInterface = instrumented{}
)

// observe records the time since start under the handler's name.
func (in instrumented) observe(handler string, start time.Time) {
	in.seconds.WithLabelValues(handler).Observe(time.Since(start).Seconds())
}

func (in instrumented) Configure(ctx context.Context, cfg, runtime, version string) (api.EventMask, error) {
	defer in.observe("Configure", time.Now())
	return in.p.Configure(ctx, cfg, runtime, version)
}

func (in instrumented) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	defer in.observe("Synchronize", time.Now())
	return in.p.Synchronize(ctx, pods, ctrs)
}

func (in instrumented) Shutdown(ctx context.Context) {
	defer in.observe("Shutdown", time.Now())
	in.p.Shutdown(ctx)
}

func (in instrumented) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	defer in.observe("RunPodSandbox", time.Now())
	return in.p.RunPodSandbox(ctx, pod)
}

func (in instrumented) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	defer in.observe("StopPodSandbox", time.Now())
	return in.p.StopPodSandbox(ctx, pod)
}

func (in instrumented) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	defer in.observe("RemovePodSandbox", time.Now())
	return in.p.RemovePodSandbox(ctx, pod)
}

func (in instrumented) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	defer in.observe("CreateContainer", time.Now())
	return in.p.CreateContainer(ctx, pod, ctr)
}

func (in instrumented) UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	defer in.observe("UpdateContainer", time.Now())
	return in.p.UpdateContainer(ctx, pod, ctr, res)
}

func (in instrumented) StopContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	defer in.observe("StopContainer", time.Now())
	return in.p.StopContainer(ctx, pod, ctr)
}

func (in instrumented) PostStartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	defer in.observe("PostStartContainer", time.Now())
	return in.p.PostStartContainer(ctx, pod, ctr)
}

func (in instrumented) RemoveContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	defer in.observe("RemoveContainer", time.Now())
	return in.p.RemoveContainer(ctx, pod, ctr)
}
