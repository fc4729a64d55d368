package plugin

import (
	"context"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/allocator"
)

// eventLog is a PodEvents sink that keeps what it is given.
type eventLog struct {
	mu  sync.Mutex
	evs []PodEvent
}

func (l *eventLog) Post(ev PodEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

// of returns the Events of a reason.
func (l *eventLog) of(reason string) []PodEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []PodEvent
	for _, ev := range l.evs {
		if ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

func withEvents(l *eventLog) func(*Plugin) { return func(p *Plugin) { p.UsePodEvents(l) } }

// TestRefusalPostsPodEvent: a refused container's pod gets a Warning with
// the runtime's own message, on the pod the sandbox names.
func TestRefusalPostsPodEvent(t *testing.T) {
	f := newFakeRuntime(t, true)
	events := &eventLog{}
	startPlugin(t, f, vm2, statePath(f), withEvents(events))
	pod := f.runPod(podSpec{name: "bad", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "turbo"}})
	_, _, err := f.createContainer(pod, "app", 1000)
	require.Error(t, err)
	got := events.of(EventRefused)
	require.Len(t, got, 1, "all: %+v", events.evs)
	assert.True(t, got[0].Warning)
	assert.Equal(t, allocator.PodRef{Namespace: "telco", Name: "bad", UID: "uid-bad"}, got[0].Pod)
	assert.Contains(t, got[0].Message, "nri-cpupool: container telco/bad/app: ")
	assert.Contains(t, got[0].Message, "turbo")
	assert.Contains(t, err.Error(), got[0].Message, "the runtime's words")
}

// TestDegradedPlacementsPostPodEvents: a memory limit no NUMA node holds,
// and an annotation for a container of another name (the container falls
// back to the default pool), are told on the pod.
func TestDegradedPlacementsPostPodEvents(t *testing.T) {
	f := newFakeRuntime(t, true)
	events := &eventLog{}
	startPlugin(t, f, vmHugePages, statePath(f), withEvents(events))
	f.mu.Lock()
	f.dress = func(ctr *api.Container) { ctr.Linux.Resources.Memory = &api.LinuxMemory{Limit: api.Int64(64 << 30)} }
	f.mu.Unlock()
	_, _, err := f.createContainer(exclusivePod(f, "big"), "db", 1000)
	require.NoError(t, err, "placed nonetheless")
	got := events.of(EventMemoryNotLocal)
	require.Len(t, got, 1, "all: %+v", events.evs)
	assert.True(t, got[0].Warning)
	assert.Equal(t, "big", got[0].Pod.Name)
	assert.Contains(t, got[0].Message, "no set of NUMA nodes holds its memory limit")

	f.mu.Lock()
	f.dress = nil
	f.mu.Unlock()
	typo := f.runPod(podSpec{name: "typo", annotations: map[string]string{"pool.cpupool.dev/container.ap": "exclusive"}})
	_, _, err = f.createContainer(typo, "app", 1000)
	require.NoError(t, err)
	got = events.of(EventAnnotationUnmatched)
	require.Len(t, got, 1, "all: %+v", events.evs)
	assert.Equal(t, "typo", got[0].Pod.Name)
	assert.Contains(t, got[0].Message, "placed in pool infra without annotation pool.cpupool.dev/container.ap")
}

// TestReloadRefusedPostsPodEvent: the pod whose running container keeps a
// reload from being applied is told.
func TestReloadRefusedPostsPodEvent(t *testing.T) {
	f := newFakeRuntime(t, true)
	events := &eventLog{}
	rp := startPlugin(t, f, desktop, statePath(f), withEvents(events))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/container.fwd": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	require.Error(t, rp.p.Reload(reloadConfig(t, rp, desktopShifted), nil, "SIGHUP"))
	got := events.of(EventReloadBlocked)
	require.Len(t, got, 1, "all: %+v", events.evs)
	assert.True(t, got[0].Warning)
	assert.Equal(t, allocator.PodRef{Namespace: "telco", Name: "dpdk", UID: "uid-dpdk"}, got[0].Pod)
	assert.Contains(t, got[0].Message, "(SIGHUP) was not applied: it would move container fwd (pool exclusive, CPUs 4,12)")
}

// TestPinnedEventsAreRateLimited: where an exclusive container was pinned
// is news, not a problem: a burst of PinnedEventBurst, then one per
// PinnedEventEvery. A shared container gets none.
func TestPinnedEventsAreRateLimited(t *testing.T) {
	events := &eventLog{}
	p := newUnitPlugin(t, &failingStore{}, `isolatedCPUs: "2-15"`)
	p.UsePodEvents(events)
	ctx := context.Background()
	_, err := p.Synchronize(ctx, nil, nil)
	require.NoError(t, err)
	const n = 14
	for i := range n {
		pod := &api.PodSandbox{Id: "sb" + string(rune('a'+i)), Name: "p" + string(rune('a'+i)), Uid: "u" + string(rune('a'+i)), Namespace: "ns",
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}
		ctr := &api.Container{Id: "c" + string(rune('a'+i)), Name: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(1024)}}}}
		_, _, err := p.CreateContainer(ctx, pod, ctr)
		require.NoError(t, err, "container %d", i)
	}
	got := events.of(EventPinned)
	// One more may have been earned if the loop took PinnedEventEvery.
	require.GreaterOrEqual(t, len(got), PinnedEventBurst)
	require.LessOrEqual(t, len(got), PinnedEventBurst+1, "at a low rate")
	assert.False(t, got[0].Warning)
	assert.Equal(t, allocator.PodRef{Namespace: "ns", Name: "pa", UID: "ua"}, got[0].Pod)
	assert.Regexp(t, `^container c pinned to pool exclusive: CPUs \d+, memory nodes `, got[0].Message)
	assert.Len(t, events.evs, len(got), "nothing else to tell")
}

// TestNamespaceNotAllowedPostsPodEvent: a Guaranteed container of whole
// CPUs that guaranteedExclusive would make exclusive, in a namespace
// allowedNamespaces.exclusive leaves out, goes to the default pool and
// its pod is told why (docs/pools.md: never silently); one in a listed
// namespace gets no such Event.
func TestNamespaceNotAllowedPostsPodEvent(t *testing.T) {
	events := &eventLog{}
	p := newUnitPlugin(t, &failingStore{}, "isolatedCPUs: \"2-15\"\nguaranteedExclusive: true\nallowedNamespaces: {exclusive: [telco]}")
	p.UsePodEvents(events)
	ctx := context.Background()
	_, err := p.Synchronize(ctx, nil, nil)
	require.NoError(t, err)
	guaranteed := func(id, ns string) (*api.PodSandbox, *api.Container) {
		pod := &api.PodSandbox{Id: "sb-" + id, Name: id, Uid: "u-" + id, Namespace: ns, Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/pod-" + id}}
		ctr := &api.Container{Id: "c-" + id, Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2048)}}}}
		return pod, ctr
	}
	pod, ctr := guaranteed("web", "web")
	adj, _, err := p.CreateContainer(ctx, pod, ctr)
	require.NoError(t, err)
	assert.Equal(t, "infra", envOf(&api.CreateContainerResponse{Adjust: adj})[EnvPool], "the default pool")
	got := events.of(EventNotAllowed)
	require.Len(t, got, 1, "all: %+v", events.evs)
	assert.True(t, got[0].Warning)
	assert.Equal(t, allocator.PodRef{Namespace: "web", Name: "web", UID: "u-web"}, got[0].Pod)
	assert.Equal(t, `container web/web/app: in pool infra, not exclusive: guaranteedExclusive would give pool exclusive, but allowedNamespaces.exclusive does not list the pod's namespace "web"`, got[0].Message)

	pod, ctr = guaranteed("dpdk", "telco")
	adj, _, err = p.CreateContainer(ctx, pod, ctr)
	require.NoError(t, err)
	assert.Equal(t, "exclusive", envOf(&api.CreateContainerResponse{Adjust: adj})[EnvPool])
	assert.Len(t, events.of(EventNotAllowed), 1, "a listed namespace is not told")
}

// TestResizeRefusalPostsPodEvent: a refused in-place resize is told on
// the pod with the error the kubelet got; an accepted one is not.
func TestResizeRefusalPostsPodEvent(t *testing.T) {
	f := newFakeRuntime(t, false)
	events := &eventLog{}
	startPlugin(t, f, xeon, statePath(f), withEvents(events))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	_, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	assert.Empty(t, events.of(EventResizeRefused), "a resize that was made")

	_, err = f.updateContainer(pod, fwd, 1000)
	require.Error(t, err)
	got := events.of(EventResizeRefused)
	require.Len(t, got, 1, "all: %+v", events.evs)
	assert.True(t, got[0].Warning)
	assert.Equal(t, allocator.PodRef{Namespace: "telco", Name: "dpdk", UID: "uid-dpdk"}, got[0].Pod)
	assert.Contains(t, err.Error(), got[0].Message, "the kubelet's words")
	assert.Contains(t, got[0].Message, "cannot shrink container telco/dpdk/fwd to 1 CPUs")
}

// TestSynchronizePostsPodEventsForWhatMovedOrWasConfined: at a plugin
// restart, a container created meanwhile that it cannot place is confined
// to infra, and one created meanwhile on every CPU is pinned to exclusive
// CPUs its environment does not name: both pods are told. A container put
// back on the CPUs it was created with, and one kept where it runs, are
// not news.
func TestSynchronizePostsPodEventsForWhatMovedOrWasConfined(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	fwd, _, _ := populate(t, f)
	first.stop()
	f.setCPUs(fwd, "") // the reply never arrived: back on its own CPUs

	web := f.runPod(podSpec{name: "sneaky", namespace: "web", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	sneaky, _, err := f.createContainer(web, "c", 2000)
	require.NoError(t, err)
	late := f.runPod(podSpec{name: "late", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	lateCtr, _, err := f.createContainer(late, "c", 1000)
	require.NoError(t, err)

	events := &eventLog{}
	startPlugin(t, f, desktop, statePath(f), withEvents(events))
	require.Equal(t, "4,12", f.cpus(fwd))
	require.Equal(t, "0,8-9", f.cpus(sneaky))

	confined := events.of(EventConfined)
	require.Len(t, confined, 1, "all: %+v", events.evs)
	assert.True(t, confined[0].Warning)
	assert.Equal(t, allocator.PodRef{Namespace: "web", Name: "sneaky", UID: "uid-sneaky"}, confined[0].Pod)
	assert.Contains(t, confined[0].Message, "container web/sneaky/c: confined to pool infra when nri-cpupool synchronized with the runtime: ")
	assert.Contains(t, confined[0].Message, "may not use pool exclusive")

	repinned := events.of(EventRepinned)
	require.Len(t, repinned, 1, "all: %+v", events.evs)
	assert.True(t, repinned[0].Warning)
	assert.Equal(t, allocator.PodRef{Namespace: "telco", Name: "late", UID: "uid-late"}, repinned[0].Pod)
	assert.Equal(t, "container telco/late/c: pinned to pool exclusive CPUs "+f.cpus(lateCtr)+" when nri-cpupool synchronized with the runtime (it ran on every CPU); CPUPOOL_CPUS in its environment, if any, is from its creation, not these",
		repinned[0].Message)
	assert.Len(t, events.evs, 2, "nothing else to tell")
}
