package kubeevents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

func quietLog() *logrus.Logger {
	log := logrus.New()
	log.SetOutput(io.Discard)
	return log
}

// serve starts a Poster on client until the test ends.
func serve(t *testing.T, client kubernetes.Interface, queue int) *Poster {
	t.Helper()
	p := New(Options{Connect: func() (kubernetes.Interface, error) { return client, nil }, NodeName: "node-1", Log: quietLog(), QueueSize: queue})
	ctx, cancel := context.WithCancel(context.Background())
	done := p.Serve(ctx)
	t.Cleanup(func() { cancel(); <-done })
	return p
}

func lost(p *Poster, why string) float64 { return testutil.ToFloat64(p.lost.WithLabelValues(why)) }

var refusal = plugin.PodEvent{Pod: allocator.PodRef{Namespace: "telco", Name: "dpdk", UID: "uid-1"}, Warning: true,
	Reason: plugin.EventRefused, Message: "nri-cpupool: container telco/dpdk/fwd: pool exclusive cannot fit 4 CPUs"}

// TestPostsEventOnPod: an Event is created on the pod the runtime named
// (kind, namespace, name, uid), from nri-cpupool on this node; the same
// Event again is counted into it (client-go's aggregation), not repeated.
func TestPostsEventOnPod(t *testing.T) {
	client := fake.NewClientset()
	p := serve(t, client, 0)
	p.Post(refusal)
	var ev corev1.Event
	require.Eventually(t, func() bool {
		l, err := client.CoreV1().Events("telco").List(context.Background(), metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 {
			return false
		}
		ev = l.Items[0]
		return true
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "telco", Name: "dpdk", UID: "uid-1"}, ev.InvolvedObject)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Equal(t, "CPUPoolRefused", ev.Reason)
	assert.Equal(t, refusal.Message, ev.Message)
	assert.Equal(t, corev1.EventSource{Component: "nri-cpupool", Host: "node-1"}, ev.Source)
	// Counted once the API call returned, just after the fake client
	// shows the Event.
	require.Eventually(t, func() bool { return testutil.ToFloat64(p.posted) == 1 }, 10*time.Second, time.Millisecond)

	p.Post(refusal)
	require.Eventually(t, func() bool {
		l, err := client.CoreV1().Events("telco").List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 1 && l.Items[0].Count == 2
	}, 10*time.Second, 10*time.Millisecond, "counted into the first")
	require.Eventually(t, func() bool { return testutil.ToFloat64(p.posted) == 2 }, 10*time.Second, time.Millisecond)
	assert.Zero(t, lost(p, LostAPI)+lost(p, LostQueueFull))
}

// TestAPIDownLosesEventsAndCountsThem: an API server that does not take
// Events loses them, counted, at once: no Event is retried for minutes
// while the others wait behind it.
func TestAPIDownLosesEventsAndCountsThem(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("*", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	})
	p := serve(t, client, 0)
	for i := range 3 {
		ev := refusal
		ev.Pod.Name = fmt.Sprintf("pod-%d", i)
		p.Post(ev)
	}
	require.Eventually(t, func() bool { return lost(p, LostAPI) == 3 }, 5*time.Second, 10*time.Millisecond, "lost: %v", lost(p, LostAPI))
	assert.Zero(t, testutil.ToFloat64(p.posted))
}

// TestQueueFullDropsWithoutWaiting: while the client cannot be made (no
// credentials yet), Post still returns at once; what the queue cannot
// hold is dropped and counted.
func TestQueueFullDropsWithoutWaiting(t *testing.T) {
	p := New(Options{Connect: func() (kubernetes.Interface, error) { return nil, errors.New("no credentials") }, Log: quietLog(), QueueSize: 4,
		RetryInitial: time.Millisecond, RetryMax: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := p.Serve(ctx)
	start := time.Now()
	for range 7 {
		p.Post(refusal)
	}
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, 3.0, lost(p, LostQueueFull))
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve does not end with its context while it waits for credentials")
	}
}

// TestCreateContainerDoesNotWaitForBlockedAPI: with an API server that
// never answers, containers are still refused and pinned at once: the
// replies do not wait for the Events, which are dropped and counted once
// the queue is full.
func TestCreateContainerDoesNotWaitForBlockedAPI(t *testing.T) {
	client := fake.NewClientset()
	blocked, release := make(chan struct{}, 1), make(chan struct{})
	client.PrependReactor("*", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case blocked <- struct{}{}:
		default:
		}
		<-release
		return true, nil, errors.New("timeout")
	})
	t.Cleanup(func() { close(release) })
	events := serve(t, client, 4)

	cfg, err := config.Parse(strings.NewReader(`isolatedCPUs: "4-7,12-15"`), "test")
	require.NoError(t, err)
	cfg.SysfsRoot = fixture.Root(t, "desktop-8c16t")
	cfg.CgroupRoot = t.TempDir()
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	require.NoError(t, err)
	cfg.StateFile = t.TempDir() + "/state.json" // the status file and the journal lie beside it
	p, err := plugin.New(cfg, topo, state.NewFileStore(cfg.StateFile), quietLog())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.UsePodEvents(events)
	ctx := context.Background()
	_, err = p.Synchronize(ctx, nil, nil)
	require.NoError(t, err)

	refused := func(i int) error {
		pod := &api.PodSandbox{Id: fmt.Sprint("sb", i), Name: fmt.Sprint("p", i), Uid: fmt.Sprint("u", i), Namespace: "ns", Annotations: map[string]string{"pool.cpupool.dev": "turbo"}}
		_, _, err := p.CreateContainer(ctx, pod, &api.Container{Id: fmt.Sprint("c", i), Name: "c"})
		return err
	}
	require.Error(t, refused(0))
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Event never reached the API server")
	}
	// The API server holds the first Event; the queue fills behind it.
	replied := make(chan error, 1)
	go func() {
		for i := 1; i <= 20; i++ {
			if refused(i) == nil {
				replied <- fmt.Errorf("container %d was not refused", i)
				return
			}
		}
		pod := &api.PodSandbox{Id: "sbx", Name: "px", Uid: "ux", Namespace: "ns", Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}
		adj, _, err := p.CreateContainer(ctx, pod, &api.Container{Id: "cx", Name: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2048)}}}})
		if err == nil && adj.GetLinux().GetResources().GetCpu().GetCpus() == "" {
			err = errors.New("no CPUs pinned")
		}
		replied <- err
	}()
	select {
	case err := <-replied:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the replies wait for the API server")
	}
	assert.Positive(t, lost(events, LostQueueFull), "what the queue cannot hold is counted")
}

// TestBounded: a long message is cut on a rune boundary.
func TestBounded(t *testing.T) {
	assert.Equal(t, "short", bounded("short"))
	long := strings.Repeat("é", MaxMessage)
	got := bounded(long)
	assert.LessOrEqual(t, len(got), MaxMessage)
	assert.True(t, strings.HasSuffix(got, "…"))
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(got, "…")))
}
