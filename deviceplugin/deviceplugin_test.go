package deviceplugin

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeKubelet is the kubelet's registration service on a real unix socket.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir  string
	srv  *grpc.Server
	regs chan *pluginapi.RegisterRequest
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{dir: dir, regs: make(chan *pluginapi.RegisterRequest, 10)}
	sock := filepath.Join(dir, "kubelet.sock")
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	k.srv = grpc.NewServer()
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go k.srv.Serve(l)
	t.Cleanup(k.srv.Stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.regs <- r
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) waitRegistered(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.regs:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the plugin did not register")
		return nil
	}
}

// client dials the plugin's endpoint as the kubelet does.
func (k *fakeKubelet) client(t *testing.T, endpoint string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// fakePool is a pool of CPUs 2-5 on NUMA nodes 0 and 1.
type fakePool struct {
	mu      sync.Mutex
	devs    []Device
	changed chan struct{}
	granted [][]string
	refuse  bool
}

func newFakePool() *fakePool {
	return &fakePool{devs: []Device{{"2", 0, true}, {"3", 0, true}, {"4", 1, true}, {"5", 1, true}}, changed: make(chan struct{}, 1)}
}

func (p *fakePool) Devices() []Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Device(nil), p.devs...)
}
func (p *fakePool) Changed() <-chan struct{} { return p.changed }
func (p *fakePool) set(devs []Device) {
	p.mu.Lock()
	p.devs = devs
	p.mu.Unlock()
	p.changed <- struct{}{}
}
func (p *fakePool) Preferred(available, must []string, size int) ([]string, error) {
	if size > len(available) {
		return nil, fmt.Errorf("too many")
	}
	return available[len(available)-size:], nil
}
func (p *fakePool) Grant(ids []string) (map[string]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse {
		return nil, fmt.Errorf("CPUs %v are held", ids)
	}
	p.granted = append(p.granted, ids)
	return map[string]string{"CPUPOOL_GRANT": fmt.Sprintf("tok%d", len(p.granted))}, nil
}

func startServer(t *testing.T, dir string, pool Pool) {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	if testing.Verbose() {
		log.SetOutput(os.Stderr)
	}
	s := New(pool, dir, "cpupool.dev/exclusive", log)
	s.Poll = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func tempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "dp-") // short: unix socket paths are limited
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func recv(t *testing.T, stream grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse]) []string {
	t.Helper()
	resp, err := stream.Recv()
	require.NoError(t, err)
	var out []string
	for _, d := range resp.Devices {
		out = append(out, fmt.Sprintf("%s/%s/numa%d", d.ID, d.Health, d.Topology.GetNodes()[0].GetID()))
	}
	return out
}

func TestRegistersAndAdvertises(t *testing.T) {
	dir := tempDir(t)
	k := startKubelet(t, dir)
	pool := newFakePool()
	startServer(t, dir, pool)
	reg := k.waitRegistered(t)
	assert.Equal(t, "cpupool.dev/exclusive", reg.ResourceName)
	assert.Equal(t, pluginapi.Version, reg.Version)
	assert.Equal(t, SocketName, reg.Endpoint)
	assert.True(t, reg.Options.GetPreferredAllocationAvailable)

	c := k.client(t, reg.Endpoint)
	opts, err := c.GetDevicePluginOptions(t.Context(), &pluginapi.Empty{})
	require.NoError(t, err)
	assert.True(t, opts.GetPreferredAllocationAvailable)

	stream, err := c.ListAndWatch(t.Context(), &pluginapi.Empty{})
	require.NoError(t, err)
	assert.Equal(t, []string{"2/Healthy/numa0", "3/Healthy/numa0", "4/Healthy/numa1", "5/Healthy/numa1"}, recv(t, stream))

	// A pool change (an annotated container took CPU 3; CPU 5 went offline)
	// reaches the kubelet.
	pool.set([]Device{{"2", 0, true}, {"3", 0, false}, {"4", 1, true}})
	assert.Equal(t, []string{"2/Healthy/numa0", "3/Unhealthy/numa0", "4/Healthy/numa1"}, recv(t, stream))

	pref, err := c.GetPreferredAllocation(t.Context(), &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{"2", "4"}, AllocationSize: 1}, {AvailableDeviceIDs: []string{"2"}, AllocationSize: 3}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"4"}, pref.ContainerResponses[0].DeviceIDs)
	assert.Empty(t, pref.ContainerResponses[1].DeviceIDs, "no preference: the kubelet chooses")

	alloc, err := c.Allocate(t.Context(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"2", "4"}}}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"CPUPOOL_GRANT": "tok1"}, alloc.ContainerResponses[0].Envs)
	assert.Equal(t, [][]string{{"2", "4"}}, pool.granted)

	pool.mu.Lock()
	pool.refuse = true
	pool.mu.Unlock()
	_, err = c.Allocate(t.Context(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"3"}}}})
	require.ErrorContains(t, err, "CPUs [3] are held", "a refused grant fails the kubelet's admission")
}

// TestReregistersWhenKubeletRestarts: a restarted kubelet recreates its
// socket and removes ours; the plugin serves again and registers again.
func TestReregistersWhenKubeletRestarts(t *testing.T) {
	dir := tempDir(t)
	k := startKubelet(t, dir)
	startServer(t, dir, newFakePool())
	k.waitRegistered(t)

	k.srv.Stop()
	os.Remove(filepath.Join(dir, SocketName)) // the kubelet cleans its directory on start
	k2 := startKubelet(t, dir)
	reg := k2.waitRegistered(t)
	stream, err := k2.client(t, reg.Endpoint).ListAndWatch(t.Context(), &pluginapi.Empty{})
	require.NoError(t, err)
	assert.Len(t, recv(t, stream), 4)
}

// TestWaitsForKubelet: without a kubelet nothing fails; when one appears,
// the plugin registers.
func TestWaitsForKubelet(t *testing.T) {
	dir := tempDir(t)
	startServer(t, dir, newFakePool())
	time.Sleep(100 * time.Millisecond)
	_, err := os.Stat(filepath.Join(dir, SocketName))
	assert.True(t, os.IsNotExist(err), "no socket is served before a kubelet is there")
	k := startKubelet(t, dir)
	k.waitRegistered(t)
}
