package plugin

// Pod Events: what the owner of a pod must know of its containers (a
// refusal, a degraded placement, where an exclusive container was
// pinned), handed to a PodEvents sink that posts them on the pod as
// Kubernetes Events, where `kubectl describe pod` shows them. The daemon
// sets the sink only with kubernetes.events on (package kubeevents, linked
// by nri-cpupool-dra alone); without one, nothing here does any work.

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"golang.org/x/time/rate"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/state"
)

// The Events' reasons, UpperCamelCase as Kubernetes has them; the first
// word says whose they are in `kubectl get events`.
const (
	// EventRefused: a container was refused; the message is the error
	// the runtime got (and the kubelet shows as CreateContainerError).
	EventRefused = "CPUPoolRefused"
	// EventMemoryNotLocal: an exclusive container was placed although no
	// set of NUMA nodes holds its memory limit.
	EventMemoryNotLocal = "CPUPoolMemoryNotLocal"
	// EventAnnotationUnmatched: a container went to the default pool while
	// the pod has an annotation for a container of another name (a typo
	// would fall back to the default pool, usually infra).
	EventAnnotationUnmatched = "CPUPoolAnnotationUnmatched"
	// EventPartitionSkipped: an exclusive container is not in the isolated
	// partition its pool gives, because it also runs on shared CPUs.
	EventPartitionSkipped = "CPUPoolPartitionSkipped"
	// EventReloadBlocked: a reload of the config was refused because it
	// would move a container of this pod.
	EventReloadBlocked = "CPUPoolReloadBlocked"
	// EventNotAllowed: a container guaranteedExclusive would have made
	// exclusive went to the default pool, because the pool's
	// allowedNamespaces does not list its namespace.
	EventNotAllowed = "CPUPoolNotAllowed"
	// EventResizeRefused: an in-place resize of a container was refused;
	// the message is the error the runtime got.
	EventResizeRefused = "CPUPoolResizeRefused"
	// EventConfined: a running container that Synchronize (a restart of
	// the plugin or the runtime) could not place was confined to infra.
	EventConfined = "CPUPoolConfined"
	// EventRepinned: Synchronize pinned a running container to exclusive
	// CPUs other than those it ran on and its environment names (it was
	// created while the plugin was away, or its CPUs could not be given
	// back).
	EventRepinned = "CPUPoolRepinned"
	// EventPinned: where an exclusive container was pinned; at a low rate
	// (PinnedEventEvery), since it is news, not a problem.
	EventPinned = "CPUPoolPinned"
)

// CPUPoolPinned Events are posted at most one per PinnedEventEvery on
// average, in bursts of PinnedEventBurst: a node that starts a hundred
// exclusive pods does not send a hundred Events while the ones that
// matter (refusals) wait behind them.
const (
	PinnedEventEvery = 10 * time.Second
	PinnedEventBurst = 10
)

// PodEvent is an Event on a pod.
type PodEvent struct {
	Pod     allocator.PodRef
	Warning bool
	Reason  string
	Message string
}

// PodEvents posts Events on pods. Post is called on the NRI reply path,
// sometimes under the plugin's lock: it must neither block nor wait for
// anything (hand the Event off, or drop it).
type PodEvents interface {
	Post(PodEvent)
}

// podEvents is the sink the plugin posts to, with the rate of its
// CPUPoolPinned Events.
type podEvents struct {
	sink   PodEvents
	pinned *rate.Limiter
}

// UsePodEvents makes the plugin post Events on pods through sink. Call it
// before Run.
func (p *Plugin) UsePodEvents(sink PodEvents) {
	p.events.Store(&podEvents{sink: sink, pinned: rate.NewLimiter(rate.Every(PinnedEventEvery), PinnedEventBurst)})
}

// postEvent hands an Event on pod to the sink, if there is one. A pod
// without a name or uid (a sandbox made by hand) cannot be referred to.
func (p *Plugin) postEvent(pod allocator.PodRef, warning bool, reason, message string) {
	e := p.events.Load()
	if e == nil || pod.Name == "" || pod.UID == "" {
		return
	}
	e.sink.Post(PodEvent{Pod: pod, Warning: warning, Reason: reason, Message: message})
}

// wantsEvents tells whether a sink is set: what is formatted only for an
// Event is formatted only then.
func (p *Plugin) wantsEvents() bool { return p.events.Load() != nil }

// eventRefused posts a container's refusal with the runtime's message.
func (p *Plugin) eventRefused(pod *api.PodSandbox, err error) {
	if p.wantsEvents() {
		p.postEvent(podRef(pod), true, EventRefused, err.Error())
	}
}

// eventPinned posts where an exclusive container was pinned, within
// PinnedEventEvery's rate; the message is formatted only when it is sent.
func (p *Plugin) eventPinned(pod allocator.PodRef, container string, st state.ContainerState) {
	e := p.events.Load()
	if e == nil || !e.pinned.Allow() {
		return
	}
	p.postEvent(pod, false, EventPinned, fmt.Sprintf("container %s pinned to pool %s: CPUs %s%s, memory nodes %s", container, st.Pool, st.CPUs, withSharedNote(st), memsShown(st.Mems)))
}

// eventRepinned tells a pod that Synchronize pinned its running container
// who to the exclusive CPUs of a, away from ranOn (empty: every CPU):
// what CPUPOOL_CPUS told it at its creation, if anything, no longer holds,
// and an application that pinned its threads by it runs on CPUs it lost.
func (p *Plugin) eventRepinned(pod *api.PodSandbox, who string, a allocator.Assignment, ranOn cpuset.CPUSet) {
	if !p.wantsEvents() {
		return
	}
	ran := "every CPU"
	if !ranOn.IsEmpty() {
		ran = "CPUs " + ranOn.String()
	}
	p.postEvent(podRef(pod), true, EventRepinned, fmt.Sprintf("container %s: pinned to pool %s CPUs %s when nri-cpupool synchronized with the runtime (it ran on %s); CPUPOOL_CPUS in its environment, if any, is from its creation, not these",
		who, a.Pool, a.Cpuset(), ran))
}

// memsShown writes a container's memory nodes, or says it has no pin.
func memsShown(mems string) string {
	if mems == "" {
		return "not pinned"
	}
	return mems
}

// eventsRef is the atomic holder of the sink: a creation reads it before
// the lock (a refusal of bounded input).
type eventsRef = atomic.Pointer[podEvents]
