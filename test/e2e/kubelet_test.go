//go:build e2e

package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeKubelet plays the two parts of the kubelet's device manager the
// resource route needs, over real unix sockets: its registration service
// (kubelet.sock in the device plugin directory) and its Allocate calls to
// the plugin's endpoint.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir  string
	regs chan *pluginapi.RegisterRequest
}

func startFakeKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{dir: dir, regs: make(chan *pluginapi.RegisterRequest, 10)}
	l, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, k)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.regs <- r
	return &pluginapi.Empty{}, nil
}

// allocator waits for the plugin's registration and returns Allocate for
// one container, as the kubelet calls it at a pod's admission: the
// environment the kubelet then gives the container.
func (k *fakeKubelet) allocator(t *testing.T) func(ids ...string) map[string]string {
	t.Helper()
	var reg *pluginapi.RegisterRequest
	select {
	case reg = <-k.regs:
	case <-time.After(30 * time.Second):
		t.Fatal("the plugin did not register with the kubelet")
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, reg.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	dp := pluginapi.NewDevicePluginClient(conn)
	return func(ids ...string) map[string]string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := dp.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		if err != nil {
			t.Fatalf("Allocate %v: %v", ids, err)
		}
		return resp.ContainerResponses[0].Envs
	}
}

// testResourceRoute: the kubelet route (cpupool.dev/exclusive) on a real
// runtime, the suite playing the kubelet's device manager. A pod's init
// container and app container are allocated the same CPU at admission, init
// container first, as the kubelet does when the app container reuses the
// init container's devices; both run on it with their own tokens. The app
// container, Guaranteed with the cpu: 10m docs/kubernetes.md suggests, runs without
// a CFS quota (cpu.max "max" on cgroup v2, cpu.cfs_quota_us -1 on v1): the
// kubelet's quota for 10m would give it 1% of the CPU it owns.
func testResourceRoute(c *tc) {
	dir := filepath.Join(c.dir, "device-plugins")
	k := startFakeKubelet(c.T, dir)
	c.startPlugin(c.exclusiveConfig() + "kubelet: {devicePlugin: true, devicePluginDir: " + dir + "}\n")
	allocate := k.allocator(c.T)
	initEnv, appEnv := allocate(c.last()), allocate(c.last())

	p := c.runPod(podSpec{name: "dp", namespace: "telco", qos: "guaranteed"})
	initID, err := c.createEnv(p, "init", 10, []string{"/bin/sh", "-c", "exit 0"}, true, initEnv)
	if err != nil {
		c.Fatalf("the init container, allocated first: %v", err)
	}
	c.equal("init container on the kubelet's CPU", c.specCPUs(initID), c.last())
	c.eventually("init container exited", func() (string, bool) {
		st := c.containerState(initID)
		return st.String(), st == runtimeapi.ContainerState_CONTAINER_EXITED
	})
	app, err := c.createEnv(p, "app", 10, []string{"/bin/sleep", "inf"}, true, appEnv)
	if err != nil {
		c.Fatalf("the app container: %v", err)
	}
	c.equal("app container on the kubelet's CPU, reused from the init container", c.cpus(p, app), c.last())
	c.equal("app container: no CFS quota on its own CPU (the kubelet's for 10m is 1000)", c.quota(p, app), "-1")

	web := c.runPod(podSpec{name: "web", qos: "burstable"})
	w := c.mustCreate(web, "app", 500)
	c.equal("infra container keeps the kubelet's quota", c.quota(web, w), "50000")
}
