package plugin

import (
	"context"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

// newHandlerSeconds makes the latency histogram of the NRI handlers: the time the
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

// instrumented serves the NRI stub on the plugin's behalf, times every
// handler, follows it while it runs (handlersInFlight: a handler that does
// not answer fails /readyz once the runtime has given up on it) and labels
// its goroutine nri=<handler> while it runs, for CPU profiles
// (internal/proflabel). It implements exactly the handler interfaces *Plugin does
// (TestInstrumentedHandlersMatchPlugin keeps them in step), since the stub
// subscribes to the events whose interfaces its plugin value implements.
type instrumented struct {
	p       *Plugin
	seconds *prometheus.HistogramVec
	// handlers are the handlers' label sets, made once (putting one on
	// then does not allocate), and their indexes in handlerNames.
	handlers map[string]handlerEntry
	// inflight follows the handlers under way (the plugin's, for
	// readiness and the metrics).
	inflight *handlersInFlight
}

// handlerEntry is what serve needs of a handler besides its function.
type handlerEntry struct {
	labels proflabel.Set
	index  int
}

// handlerNames are the handlers instrumented serves.
var handlerNames = []string{"Configure", "Synchronize", "Shutdown", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox",
	"CreateContainer", "UpdateContainer", "StopContainer", "PostStartContainer", "RemoveContainer"}

func newInstrumented(p *Plugin) instrumented {
	handlers := make(map[string]handlerEntry, len(handlerNames))
	for i, name := range handlerNames {
		handlers[name] = handlerEntry{labels: proflabel.NRI(name), index: i}
	}
	return instrumented{p: p, seconds: p.metrics.handlers, handlers: handlers, inflight: &p.conn.inflight}
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

// serve runs a handler: followed while it runs, labelled for profiles,
// its time recorded under its name.
func (in instrumented) serve(ctx context.Context, handler string, f func()) {
	start := time.Now()
	h := in.handlers[handler]
	defer in.leave(handler, start, in.inflight.enter(start, h.index))
	h.labels.Do(ctx, f)
}

// leave ends a handler's run: it is no longer under way, and its time is
// recorded.
func (in instrumented) leave(handler string, start time.Time, slot int) {
	in.inflight.leave(slot)
	in.observe(handler, start)
}

// observe records the time since start under the handler's name.
func (in instrumented) observe(handler string, start time.Time) {
	in.seconds.WithLabelValues(handler).Observe(time.Since(start).Seconds())
}

func (in instrumented) Configure(ctx context.Context, cfg, runtime, version string) (mask api.EventMask, err error) {
	in.serve(ctx, "Configure", func() { mask, err = in.p.Configure(ctx, cfg, runtime, version) })
	return mask, err
}

func (in instrumented) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) (updates []*api.ContainerUpdate, err error) {
	in.serve(ctx, "Synchronize", func() { updates, err = in.p.Synchronize(ctx, pods, ctrs) })
	return updates, err
}

func (in instrumented) Shutdown(ctx context.Context) {
	in.serve(ctx, "Shutdown", func() { in.p.Shutdown(ctx) })
}

func (in instrumented) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) (err error) {
	in.serve(ctx, "RunPodSandbox", func() { err = in.p.RunPodSandbox(ctx, pod) })
	return err
}

func (in instrumented) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) (err error) {
	in.serve(ctx, "StopPodSandbox", func() { err = in.p.StopPodSandbox(ctx, pod) })
	return err
}

func (in instrumented) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) (err error) {
	in.serve(ctx, "RemovePodSandbox", func() { err = in.p.RemovePodSandbox(ctx, pod) })
	return err
}

func (in instrumented) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (adj *api.ContainerAdjustment, updates []*api.ContainerUpdate, err error) {
	in.serve(ctx, "CreateContainer", func() { adj, updates, err = in.p.CreateContainer(ctx, pod, ctr) })
	return adj, updates, err
}

func (in instrumented) UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) (updates []*api.ContainerUpdate, err error) {
	in.serve(ctx, "UpdateContainer", func() { updates, err = in.p.UpdateContainer(ctx, pod, ctr, res) })
	return updates, err
}

func (in instrumented) StopContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (updates []*api.ContainerUpdate, err error) {
	in.serve(ctx, "StopContainer", func() { updates, err = in.p.StopContainer(ctx, pod, ctr) })
	return updates, err
}

func (in instrumented) PostStartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (err error) {
	in.serve(ctx, "PostStartContainer", func() { err = in.p.PostStartContainer(ctx, pod, ctr) })
	return err
}

func (in instrumented) RemoveContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (err error) {
	in.serve(ctx, "RemoveContainer", func() { err = in.p.RemoveContainer(ctx, pod, ctr) })
	return err
}
