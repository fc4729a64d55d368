// Package kubeevents posts the plugin's pod Events (plugin.PodEvent) to the
// API server through client-go's event broadcaster, which aggregates
// repeated Events and rate-limits them per pod. Only nri-cpupool-dra links
// it (the Kubernetes client libraries cost every node that links them
// memory, issue 33), and only a config with kubernetes.events on makes a
// Poster: without one, no client, broadcaster or goroutine of client-go
// exists.
//
// Everything that talks to the API server runs in the background: Post
// hands the Event to a bounded queue and returns, dropping it when the
// queue is full, so pinning never waits for the API server. An Event the
// API server does not take (unreachable, refused, no RBAC) is lost, not
// retried. Each loss is counted in cpupool_pod_events_lost_total.
package kubeevents

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	recordutil "k8s.io/client-go/tools/record/util"
	"k8s.io/klog/v2"

	"github.com/cpupool/nri-cpupool/plugin"
)

// Component is the Events' source (`kubectl describe pod` shows it in the
// From column, with the node's name).
const Component = "nri-cpupool"

// QueueSize is how many Events wait for the background worker; more are
// dropped (and counted) rather than waited for.
const QueueSize = 256

// MaxMessage bounds an Event's message: the runtime's error for a
// refusal can be long, and the API server keeps Events in etcd.
const MaxMessage = 1024

// requestTimeout bounds one call to the API server: an unreachable one
// must not hold the queue for minutes.
const requestTimeout = 10 * time.Second

// The reasons an Event was lost (cpupool_pod_events_lost_total's "why").
const (
	LostQueueFull = "queue_full"
	LostAPI       = "api"
	LostSpam      = "spam_filter"
)

// Connect makes the API client; NewClient with the configured kubeconfig
// in the daemon, a fake clientset in tests.
type Connect func() (kubernetes.Interface, error)

// Options configure a Poster.
type Options struct {
	Connect Connect
	// NodeName is the Events' source host.
	NodeName string
	Log      *logrus.Logger
	// QueueSize overrides QueueSize (tests).
	QueueSize int
	// RetryInitial and RetryMax bound the wait between attempts to make
	// the client (1 s and 1 min by default).
	RetryInitial, RetryMax time.Duration
}

// Poster posts pod Events in the background (Serve). It implements
// plugin.PodEvents.
type Poster struct {
	opts      Options
	queue     chan plugin.PodEvent
	lost      *prometheus.CounterVec
	lostQueue prometheus.Counter
	lostAPI   prometheus.Counter
	lostSpam  prometheus.Counter
	posted    prometheus.Counter
	// failing tells that the last write failed: the log says so once per
	// outage, not once per Event.
	failing atomic.Bool
}

// New makes a Poster. It does not connect: Serve does, in the background.
func New(opts Options) *Poster {
	if opts.QueueSize <= 0 {
		opts.QueueSize = QueueSize
	}
	if opts.RetryInitial <= 0 {
		opts.RetryInitial = time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = time.Minute
	}
	if opts.Log == nil {
		opts.Log = logrus.New()
	}
	p := &Poster{
		opts:  opts,
		queue: make(chan plugin.PodEvent, opts.QueueSize),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cpupool_pod_events_lost_total",
			Help: "Pod Events not posted, by why: queue_full (more waiting than the queue holds, for example while the API client cannot be made), api (the API server was unreachable or refused the Event, e.g. for lack of RBAC), spam_filter (more than 25 Events on one pod, then more than one per 5 minutes). Pinning never waits for them."}, []string{"why"}),
		posted: prometheus.NewCounter(prometheus.CounterOpts{Name: "cpupool_pod_events_posted_total",
			Help: "Pod Events the API server took (new ones and repeats counted into an earlier one)."}),
	}
	// Resolved once: Post must not look labels up on the reply path.
	p.lostQueue = p.lost.WithLabelValues(LostQueueFull)
	p.lostAPI = p.lost.WithLabelValues(LostAPI)
	p.lostSpam = p.lost.WithLabelValues(LostSpam)
	return p
}

// Post implements plugin.PodEvents: it never blocks.
func (p *Poster) Post(ev plugin.PodEvent) {
	select {
	case p.queue <- ev:
	default:
		p.lostQueue.Inc()
	}
}

// Collector returns the Poster's metrics.
func (p *Poster) Collector() prometheus.Collector { return collector{p} }

type collector struct{ p *Poster }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	c.p.lost.Describe(ch)
	c.p.posted.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.p.lost.Collect(ch)
	c.p.posted.Collect(ch)
}

// Serve makes the API client (trying again with backoff while it cannot:
// a kubeconfig may appear only when the node joins its cluster) and posts
// the queued Events until ctx ends. The channel closes when it has
// stopped.
func (p *Poster) Serve(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := p.connect(ctx)
		if client == nil {
			return
		}
		p.post(ctx, client)
	}()
	return done
}

// connect makes the client, or returns nil when ctx ends first.
func (p *Poster) connect(ctx context.Context) kubernetes.Interface {
	wait := p.opts.RetryInitial
	for warned := false; ctx.Err() == nil; {
		client, err := p.opts.Connect()
		if err == nil {
			return client
		}
		if !warned {
			p.opts.Log.Warnf("pod Events: %v; trying again, Events are lost meanwhile (containers are pinned as usual)", err)
			warned = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(wait*2, p.opts.RetryMax)
	}
	return nil
}

// post runs the broadcaster and feeds it the queue until ctx ends, one
// Event at a time: the next is handed to the recorder only once the last
// is written or given up, so the queue is the only place Events wait,
// and every Event is either posted or counted lost. (client-go's own
// sink loop, StartRecordingToSink, would retry an Event for two minutes
// while up to a thousand wait behind it, and drop the rest without a
// count.)
func (p *Poster) post(ctx context.Context, client kubernetes.Interface) {
	// client-go logs through klog, which would write to stderr beside the
	// daemon's log: this package logs what matters itself.
	quiet := klog.NewContext(ctx, logr.Discard())
	b := record.NewBroadcaster(record.WithContext(quiet))
	defer b.Shutdown()
	sink := &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
	// Aggregation (the same Event counted into the first) and the spam
	// filter (per pod, 25 at once, then one per 5 minutes) are client-go's.
	correlator := record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{})
	handled := make(chan struct{}, 1)
	b.StartEventWatcher(func(ev *corev1.Event) {
		p.write(sink, correlator, ev)
		handled <- struct{}{}
	})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component, Host: p.opts.NodeName}).WithLogger(logr.Discard())
	for {
		var ev plugin.PodEvent
		select {
		case <-ctx.Done():
			return
		case ev = <-p.queue:
		}
		typ := corev1.EventTypeNormal
		if ev.Warning {
			typ = corev1.EventTypeWarning
		}
		// A reference to a pod and a valid type always make an Event,
		// which reaches the watcher: the recorder's queue is empty.
		rec.Event(podReference(ev.Pod.Namespace, ev.Pod.Name, ev.Pod.UID), typ, ev.Reason, bounded(ev.Message))
		select {
		case <-ctx.Done():
			return
		case <-handled:
		}
	}
}

// write posts one Event, as client-go's recorder does (a repeat patches
// the count of the Event it repeats, or creates it anew when that one is
// gone), but once: an Event the API server does not take is lost.
func (p *Poster) write(sink record.EventSink, correlator *record.EventCorrelator, ev *corev1.Event) {
	cp := *ev // the broadcaster's watchers share it
	res, err := correlator.EventCorrelate(&cp)
	if err != nil || res.Skip {
		p.lostSpam.Inc()
		return
	}
	var got *corev1.Event
	if res.Event.Count > 1 {
		got, err = sink.Patch(res.Event, res.Patch)
	}
	if res.Event.Count <= 1 || recordutil.IsKeyNotFoundError(err) {
		res.Event.ResourceVersion = ""
		got, err = sink.Create(res.Event)
	}
	if err != nil {
		p.lostAPI.Inc()
		if !p.failing.Swap(true) {
			p.opts.Log.Warnf("pod Events: posting %s on pod %s/%s: %v; Events are lost until the API server takes them (cpupool_pod_events_lost_total; containers are pinned as usual)",
				ev.Reason, ev.InvolvedObject.Namespace, ev.InvolvedObject.Name, err)
		} else {
			p.opts.Log.Debugf("pod Events: posting %s on pod %s/%s: %v", ev.Reason, ev.InvolvedObject.Namespace, ev.InvolvedObject.Name, err)
		}
		return
	}
	correlator.UpdateState(got)
	p.posted.Inc()
	if p.failing.Swap(false) {
		p.opts.Log.Infof("pod Events: the API server takes them again")
	}
}

// podReference is the Event's involvedObject: the pod, by the name,
// namespace and uid the runtime gave for its sandbox.
func podReference(namespace, name, uid string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name, UID: types.UID(uid)}
}

// bounded cuts a message at MaxMessage bytes, on a rune boundary.
func bounded(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	cut := MaxMessage - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// NewClient makes the API client of the Events: with the kubeconfig file
// at path (the systemd unit), or with the pod's service account when path
// is empty (the DaemonSet). It does not reach the API server.
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("in-cluster credentials: %w (outside a pod, set kubernetes.kubeconfig)", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = Component
	cfg.Timeout = requestTimeout
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	return client, nil
}
