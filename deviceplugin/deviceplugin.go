// Package deviceplugin makes the exclusive pool visible to the scheduler: it
// serves the kubelet's device plugin API (v1beta1) for cpupool.dev/exclusive,
// one device per exclusive CPU with its NUMA node, and registers with the
// kubelet again whenever the kubelet restarts. What the devices are, which
// to prefer and what an allocation means are the Pool's business; this
// package only speaks the protocol.
package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Device is one advertised CPU.
type Device struct {
	ID string
	// NUMA is the CPU's NUMA node, -1 if unknown.
	NUMA int
	// Healthy is false for a CPU that is not free to give (held by a
	// container the kubelet did not allocate it to): the kubelet then keeps
	// it out of allocatable.
	Healthy bool
}

// Pool is what the device plugin needs from the daemon.
type Pool interface {
	// Devices lists the CPUs to advertise, sorted.
	Devices() []Device
	// Changed is signalled (not necessarily once per change) when Devices
	// may have changed.
	Changed() <-chan struct{}
	// Preferred picks size devices among available, including mustInclude.
	Preferred(available, mustInclude []string, size int) ([]string, error)
	// Grant records the kubelet's allocation of devices to one container and
	// returns the environment that lets the daemon recognise it.
	Grant(ids []string) (env map[string]string, err error)
}

// SocketName is the plugin's own socket in the device plugin directory.
const SocketName = "cpupool-exclusive.sock"

// Server serves one resource to the kubelet.
type Server struct {
	pluginapi.UnimplementedDevicePluginServer

	pool     Pool
	dir      string
	resource string
	log      *logrus.Logger
	// Poll is how often the kubelet's socket is checked for a restart.
	Poll time.Duration

	mu  sync.Mutex
	gen chan struct{} // closed and replaced when the devices may have changed
}

// New returns a server for resource whose sockets live in dir (the kubelet's
// device plugin directory).
func New(pool Pool, dir, resource string, log *logrus.Logger) *Server {
	return &Server{pool: pool, dir: dir, resource: resource, log: log, Poll: time.Second, gen: make(chan struct{})}
}

// Run serves and registers until ctx ends. Without a kubelet it waits for
// one quietly; when the kubelet restarts (its socket is recreated and our
// socket removed) it serves anew and registers again.
func (s *Server) Run(ctx context.Context) error {
	go s.fanOut(ctx)
	kubeletSock := filepath.Join(s.dir, "kubelet.sock")
	waiting := false
	for {
		id, err := socketID(kubeletSock)
		if err == nil {
			err = s.serveOnce(ctx, kubeletSock, id)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !waiting {
				s.log.Infof("kubelet device plugin: %v; waiting for the kubelet", err)
			}
			waiting = true
		} else {
			waiting = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.Poll):
		}
	}
}

// serveOnce serves on a fresh socket, registers and returns when the
// kubelet's socket changes or ours disappears.
func (s *Server) serveOnce(ctx context.Context, kubeletSock string, kubeletID string) error {
	own := filepath.Join(s.dir, SocketName)
	if err := os.Remove(own); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing stale socket %s: %w", own, err)
	}
	l, err := listenUnix(own)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, s)
	go srv.Serve(l)
	defer func() {
		srv.Stop()
		os.Remove(own)
	}()
	ownID, err := socketID(own)
	if err != nil {
		return err
	}
	if err := s.register(ctx, kubeletSock); err != nil {
		return err
	}
	s.log.Infof("kubelet device plugin: registered %s (%d devices) at %s", s.resource, len(s.pool.Devices()), kubeletSock)
	t := time.NewTicker(s.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if id, err := socketID(kubeletSock); err != nil || id != kubeletID {
			s.log.Infof("kubelet device plugin: the kubelet restarted (%s recreated); registering again", kubeletSock)
			return nil
		}
		if id, err := socketID(own); err != nil || id != ownID {
			s.log.Infof("kubelet device plugin: %s was removed; serving and registering again", own)
			return nil
		}
	}
}

func (s *Server) register(ctx context.Context, kubeletSock string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", kubeletSock, err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     SocketName,
		ResourceName: s.resource,
		Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	if err != nil {
		return fmt.Errorf("registering %s with the kubelet at %s: %w", s.resource, kubeletSock, err)
	}
	return nil
}

// fanOut turns the pool's change signal into a broadcast to every stream.
func (s *Server) fanOut(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.pool.Changed():
		}
		s.mu.Lock()
		close(s.gen)
		s.gen = make(chan struct{})
		s.mu.Unlock()
	}
}

func (s *Server) generation() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// GetDevicePluginOptions: the kubelet may ask for preferred allocations.
func (s *Server) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch sends the devices, then again whenever they change.
func (s *Server) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	var last []Device
	for {
		gen := s.generation()
		devs := s.pool.Devices()
		if last == nil || !slices.Equal(devs, last) {
			if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: toAPI(devs)}); err != nil {
				return err
			}
			s.log.Debugf("kubelet device plugin: advertised %d devices", len(devs))
			last = devs
			if last == nil {
				last = []Device{}
			}
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-gen:
		}
	}
}

func toAPI(devs []Device) []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(devs))
	for _, d := range devs {
		health := pluginapi.Healthy
		if !d.Healthy {
			health = pluginapi.Unhealthy
		}
		dev := &pluginapi.Device{ID: d.ID, Health: health}
		if d.NUMA >= 0 {
			dev.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.NUMA)}}}
		}
		out = append(out, dev)
	}
	return out
}

// GetPreferredAllocation answers with the daemon's own placement rules.
func (s *Server) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		ids, err := s.pool.Preferred(cr.GetAvailableDeviceIDs(), cr.GetMustIncludeDeviceIDs(), int(cr.GetAllocationSize()))
		if err != nil {
			// Only a preference: the kubelet then chooses by itself.
			s.log.Warnf("kubelet device plugin: no preferred allocation of %d among %v: %v", cr.GetAllocationSize(), cr.GetAvailableDeviceIDs(), err)
			ids = nil
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate records each container's CPUs with the daemon. An error makes the
// kubelet refuse the pod (UnexpectedAdmissionError) rather than run it
// unpinned.
func (s *Server) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		env, err := s.pool.Grant(cr.GetDevicesIds())
		if err != nil {
			s.log.Errorf("kubelet device plugin: refusing allocation of %s %v: %v", s.resource, cr.GetDevicesIds(), err)
			return nil, fmt.Errorf("nri-cpupool: %w", err)
		}
		s.log.Infof("kubelet device plugin: allocated %s CPUs %v", s.resource, cr.GetDevicesIds())
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{Envs: env})
	}
	return resp, nil
}

// PreStartContainer is not used (the NRI plugin pins at creation).
func (s *Server) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// socketID identifies a socket file so that a recreated one is noticed.
func socketID(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("no kubelet socket: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return "", fmt.Errorf("%s is not a socket", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.ModTime().String(), nil
	}
	return fmt.Sprintf("%d:%d:%d", st.Dev, st.Ino, fi.ModTime().UnixNano()), nil
}
