package dra

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/cpupool/nri-cpupool/pools"
)

// served is a driver served over the kubelet's DRA gRPC API by the
// kubeletplugin helper, against a fake API server.
type served struct {
	*testDriver
	client *fake.Clientset
	dra    drapb.DRAPluginClient
	cancel func()
	done   chan error
}

func serve(t *testing.T, td *testDriver, objects ...*resourceapi.ResourceClaim) *served {
	t.Helper()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}})
	// The API server names objects created with generateName; the fake
	// one does not.
	var generated atomic.Int64
	client.PrependReactor("create", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj := action.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice)
		if obj.Name == "" {
			obj.Name = obj.GenerateName + strconv.FormatInt(generated.Add(1), 10)
		}
		return false, nil, nil
	})
	for _, c := range objects {
		_, err := client.ResourceV1().ResourceClaims(c.Namespace).Create(context.Background(), c, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	dir := t.TempDir()
	paths := Paths{PluginDir: filepath.Join(dir, "plugins", DriverName), RegistryDir: filepath.Join(dir, "registry")}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{testDriver: td, client: client, cancel: cancel, done: make(chan error, 1)}
	// The kubelet makes its registry directory before any plugin starts;
	// made after Serve, the registrar could find it missing.
	require.NoError(t, os.MkdirAll(paths.RegistryDir, 0o750), "the kubelet's")
	go func() { s.done <- td.Serve(ctx, connected(client), paths) }()
	sock := filepath.Join(paths.PluginDir, "dra.sock")
	reg := filepath.Join(paths.RegistryDir, DriverName+"-reg.sock")
	// The helper starts the DRA service and the registrar one after the
	// other: wait for both sockets, not for the first one only.
	require.Eventually(t, func() bool {
		select {
		case err := <-s.done:
			require.NoError(t, err, "Serve returned")
		default:
		}
		return fileExists(sock) && fileExists(reg)
	}, 10*time.Second, 10*time.Millisecond, "the DRA socket and the registration socket for the kubelet")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	s.dra = drapb.NewDRAPluginClient(conn)
	t.Cleanup(func() {
		conn.Close()
		s.stop(t)
	})
	return s
}

func (s *served) stop(t *testing.T) {
	t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

func (s *served) slices(t *testing.T) []resourceapi.ResourceSlice {
	t.Helper()
	list, err := s.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return list.Items
}

// cpus counts the CPUs the published slices offer, in either model.
func (s *served) cpus(t *testing.T) int {
	t.Helper()
	n := 0
	for _, sl := range s.slices(t) {
		for _, dev := range sl.Spec.Devices {
			if c, ok := dev.Capacity[CapacityCPUs]; ok {
				n += int(c.Value.Value())
			} else {
				n++
			}
		}
	}
	return n
}

// Through the kubelet's gRPC API: the helper fetches the claim from the
// API server and calls Prepare; the answer carries the CDI device; the
// slices are published for the node; Unprepare releases.
func TestServeOverTheKubeletAPI(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app-cpus", slots{"cpus": slotsOn(pools.Exclusive, 3, 0, 4)}, "pod-1")
	s := serve(t, td, claim)

	// ResourceSlices: one device per NUMA node for the 376 exclusive
	// CPUs, one for 7 exclusive-non-isolcpus ones (infra's 8 CPUs, less
	// the minInfraCPUs of 1 it keeps).
	require.Eventually(t, func() bool { return s.cpus(t) == 376+7 }, 10*time.Second, 20*time.Millisecond)
	sl := s.slices(t)
	require.Len(t, sl, 1)
	assert.Equal(t, DriverName, sl[0].Spec.Driver)
	assert.Equal(t, testNode, *sl[0].Spec.NodeName)
	assert.Equal(t, testNode, sl[0].Spec.Pool.Name)
	assert.Len(t, sl[0].Spec.Devices, 9)
	require.Len(t, sl[0].OwnerReferences, 1, "owned by the Node, so they go with it")
	assert.Equal(t, "Node", sl[0].OwnerReferences[0].Kind)

	resp, err := s.dra.NodePrepareResources(context.Background(), &drapb.NodePrepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "ns", Name: "app-cpus", Uid: "uid-1"}}})
	require.NoError(t, err)
	got := resp.Claims["uid-1"]
	require.NotNil(t, got)
	require.Empty(t, got.Error)
	require.Len(t, got.Devices, 4)
	assert.Equal(t, []string{CDIDeviceID("uid-1", "cpus")}, got.Devices[0].CdiDeviceIds)
	assert.FileExists(t, cdiFile(td.cdi, "uid-1"))
	assert.Equal(t, 4, cpusOf(t, td.Driver, "uid-1", "cpus").Size())

	// A claim the API server does not have.
	resp, err = s.dra.NodePrepareResources(context.Background(), &drapb.NodePrepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "ns", Name: "nope", Uid: "uid-9"}}})
	assert.Error(t, err)
	assert.Nil(t, resp)

	un, err := s.dra.NodeUnprepareResources(context.Background(), &drapb.NodeUnprepareResourcesRequest{
		Claims: []*drapb.Claim{{Namespace: "ns", Name: "app-cpus", Uid: "uid-1"}}})
	require.NoError(t, err)
	assert.Empty(t, un.Claims["uid-1"].Error)
	assert.NoFileExists(t, cdiFile(td.cdi, "uid-1"))
	assert.Empty(t, td.Claims())
}

// The slices follow the node: CPUs a container holds outside any claim
// leave the offer, and come back when it lets them go.
func TestServeRepublishesWhenThePoolsChange(t *testing.T) {
	p := &changingPools{Static: static(t, "xeon-2s-interleaved", `reservedCPUs: "0,40"
pools: {exclusive: {count: 60}}`), changed: make(chan struct{}, 1)}
	td := newTestDriver(t, p)
	s := serve(t, td)
	count := func() int { return s.cpus(t) }
	// The waits are for the republish, not for its speed: on the loaded
	// machine, under -race, one took longer than 10 s (the resourceslice
	// controller retries a failed sync after an exponential backoff; that
	// this was the cause is not confirmed).
	require.Eventually(t, func() bool { return count() == 60 }, 30*time.Second, 20*time.Millisecond)
	p.hold(set(t, "3,5,7"))
	require.Eventually(t, func() bool { return count() == 57 }, 30*time.Second, 20*time.Millisecond)
	p.hold(set(t, ""))
	require.Eventually(t, func() bool { return count() == 60 }, 30*time.Second, 20*time.Millisecond)
}

// The config is read when the daemon starts: a daemon started with
// another config publishes the slices of its pools, whatever the claims
// file remembers.
func TestServePublishesThePoolsOfANewConfig(t *testing.T) {
	td := newTestDriver(t, static(t, "xeon-2s-interleaved", ""))
	prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))
	s := serve(t, td)
	require.Eventually(t, func() bool { return s.cpus(t) == 76 }, 10*time.Second, 20*time.Millisecond, "the kernel's isolated CPUs")
	s.stop(t)

	// Four CPUs of node 1 go to the shared pool, and infra lends its CPUs
	// but one (minInfraCPUs) through exclusive-non-isolcpus.
	td.pools = static(t, "xeon-2s-interleaved", `pools:
  shared: {cpus: "31,33,35,37"}
  exclusive-non-isolcpus: {enabled: true}`)
	td.Driver = td.restart(t)
	s = serve(t, td)
	capacity := func() map[string]int64 {
		out := map[string]int64{}
		for _, sl := range s.slices(t) {
			for _, dev := range sl.Spec.Devices {
				c := dev.Capacity[CapacityCPUs]
				out[dev.Name] = c.Value.Value()
			}
		}
		return out
	}
	want := map[string]int64{"exclusive-numa0": 38, "exclusive-numa1": 34, "exclusive-non-isolcpus-numa0": 2, "exclusive-non-isolcpus-numa1": 1}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, capacity()) }, 10*time.Second, 20*time.Millisecond, "got %v", capacity())
}

// Claims the API server no longer has are forgotten when the driver
// starts: their pods ended while nobody could unprepare them.
func TestServeForgetsStaleClaims(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	live := allocatedClaim("uid-1", "live", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-1")
	prepare(t, td.Driver, live,
		allocatedClaim("uid-2", "gone", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-2"),
		allocatedClaim("uid-3", "replaced", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-3"))
	td.Driver = td.restart(t)
	replaced := allocatedClaim("uid-4", "replaced", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-4")
	serve(t, td, live, replaced)
	assert.Eventually(t, func() bool { return len(td.Claims()) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, td.Claims(), "uid-1")
	// The spec goes after the claims file is written (unprepareLocked):
	// forgotten in memory first, it may still be there for a moment (a
	// loaded -race run saw it).
	assert.Eventually(t, func() bool {
		_, err := os.Stat(cdiFile(td.cdi, "uid-2"))
		return os.IsNotExist(err)
	}, 10*time.Second, 10*time.Millisecond, "the forgotten claim's CDI spec is removed")
	assert.Len(t, td.restart(t).Claims(), 1, "and the file says so")
}

// A node's first boot starts the daemon before the kubelet (issue 30,
// defect 10): the kubelet's plugin registration directory does not exist
// yet. The driver waits for it, says so in its state, its status file and
// its metric, and does not return (which stopped the whole daemon, NRI side
// included); once the kubelet has made the directory the driver serves,
// and the kubelet's confirmation makes it registered.
func TestServeWaitsForTheKubeletsDirectories(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	td.retry = retry{initial: time.Millisecond, max: 20 * time.Millisecond}
	dir := t.TempDir()
	td.statusFile = filepath.Join(dir, "state", "dra-status.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(td.statusFile), 0o750))
	kubelet := filepath.Join(dir, "kubelet")
	paths := Paths{PluginDir: filepath.Join(kubelet, "plugins", DriverName), RegistryDir: filepath.Join(kubelet, "plugins_registry")}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}})
	done := serving(t, td, connected(client), paths)

	require.Eventually(t, func() bool { return td.Status().State == StateWaitingForKubelet }, 10*time.Second, time.Millisecond)
	assert.Contains(t, td.Status().Detail, paths.RegistryDir+": it does not exist; the kubelet makes it when it starts")
	st, ok, err := ReadStatus(td.statusFile)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, StateWaitingForKubelet, st.State, "the status file, for nri-cpupool status")
	require.NoError(t, testutil.CollectAndCompare(td.Collector(), strings.NewReader(stateMetric(StateWaitingForKubelet)), "cpupool_dra_driver_state"))
	// Several looks later it still waits, and nothing was made in the
	// kubelet's place.
	require.Eventually(t, func() bool { return td.Status().Since.Before(time.Now().Add(-50 * time.Millisecond)) }, 10*time.Second, 5*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Serve returned while waiting for the kubelet: %v", err)
	default:
	}
	assert.NoDirExists(t, kubelet, "the driver makes none of the kubelet's directories")

	// The kubelet starts and makes its directories.
	require.NoError(t, os.MkdirAll(paths.RegistryDir, 0o750))
	reg := filepath.Join(paths.RegistryDir, DriverName+"-reg.sock")
	require.Eventually(t, func() bool { return fileExists(reg) && td.Status().State == StateServing }, 10*time.Second, 5*time.Millisecond)
	conn, err := grpc.NewClient("unix://"+reg, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	registration := registerapi.NewRegistrationClient(conn)
	info, err := registration.GetInfo(context.Background(), &registerapi.InfoRequest{})
	require.NoError(t, err)
	assert.Equal(t, DriverName, info.Name)
	assert.Equal(t, filepath.Join(paths.PluginDir, "dra.sock"), info.Endpoint)
	_, err = registration.NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{PluginRegistered: true})
	require.NoError(t, err)
	assert.Equal(t, StateRegistered, td.Status().State)
	st, _, err = ReadStatus(td.statusFile)
	require.NoError(t, err)
	assert.Equal(t, StateRegistered, st.State)
	require.NoError(t, testutil.CollectAndCompare(td.Collector(), strings.NewReader(stateMetric(StateRegistered)), "cpupool_dra_driver_state"))
}

// TestStateHelpNamesEveryState: the help of cpupool_dra_driver_state
// names every state the collector reports (review 58, item 14: it lacked
// waiting-for-credentials).
func TestStateHelpNamesEveryState(t *testing.T) {
	assert.Equal(t, "The DRA driver's state (starting, waiting-for-credentials, waiting-for-kubelet, retrying, serving, registered, stopped): 1 for the current one. Pinning does not depend on it.", stateHelp)
	for _, s := range States() {
		assert.Contains(t, stateHelp, string(s))
	}
}

// stateMetric is cpupool_dra_driver_state in the text format with the
// driver in state now.
func stateMetric(now State) string {
	out := "# HELP cpupool_dra_driver_state " + stateHelp + "\n# TYPE cpupool_dra_driver_state gauge\n"
	for _, s := range States() {
		v := "0"
		if s == now {
			v = "1"
		}
		out += `cpupool_dra_driver_state{state="` + string(s) + `"} ` + v + "\n"
	}
	return out
}

// connected is a Connect that gives client at once.
func connected(client kubernetes.Interface) Connect {
	return func() (kubernetes.Interface, error) { return client, nil }
}

// A kubeconfig that does not exist yet (a node that has not joined its
// cluster: kubeadm join writes it later) is waited for, as the kubelet's
// directories are: the driver says so in its state and metric, does not
// return (which stopped the daemon, NRI side included), and goes on once
// the client can be made.
func TestServeWaitsForCredentials(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	td.retry = retry{initial: time.Millisecond, max: 20 * time.Millisecond}
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet")
	paths := Paths{PluginDir: filepath.Join(kubelet, "plugins", DriverName), RegistryDir: filepath.Join(kubelet, "plugins_registry")}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}})
	var mu sync.Mutex
	tries, joined := 0, false
	connect := func() (kubernetes.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		tries++
		if !joined {
			return nil, errors.New("DRA: kubeconfig /etc/kubernetes/kubelet.conf: no such file or directory")
		}
		return client, nil
	}
	done := serving(t, td, connect, paths)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return tries >= 3 && td.Status().State == StateWaitingForCredentials
	}, 10*time.Second, time.Millisecond, "tried again with backoff")
	assert.Contains(t, td.Status().Detail, "kubelet.conf: no such file or directory")
	require.NoError(t, testutil.CollectAndCompare(td.Collector(), strings.NewReader(stateMetric(StateWaitingForCredentials)), "cpupool_dra_driver_state"))
	select {
	case err := <-done:
		t.Fatalf("Serve returned while waiting for credentials: %v", err)
	default:
	}

	// The node joins: the client is made, and the driver goes on to wait
	// for the kubelet's directories.
	mu.Lock()
	joined = true
	mu.Unlock()
	require.Eventually(t, func() bool { return td.Status().State == StateWaitingForKubelet }, 10*time.Second, time.Millisecond)
}

// serving runs td.Serve in the background until the test ends, then
// checks that it returns, without error, once its context is cancelled.
// done has Serve's error if it returns before.
func serving(t *testing.T, td *testDriver, connect Connect, paths Paths) (done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() { returned <- td.Serve(ctx, connect, paths) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-returned:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return")
		}
	})
	return returned
}
