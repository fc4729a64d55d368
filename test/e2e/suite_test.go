//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"
)

// Environment (set by test/e2e/e2e.sh from test/e2e/tools.sh):
//
//	E2E_TOOLS          containerd v2.4.2 with its shim and ctr
//	E2E_RUNC           runc built with seccomp
//	E2E_CONTAINERD_OLD the oldest supported containerd (with shim and ctr)
//	E2E_CRIO           crio, pinns, copyimg (CRI-O v1.36.3); E2E_CRIO_SKIP says why not
//	E2E_PLUGIN         bin/nri-cpupool (default: the repository's)
const image = "docker.io/library/busybox:e2e"

var (
	repoRoot   string
	pluginBin  string
	runID      = strconv.Itoa(os.Getpid())
	uidCounter atomic.Int64
)

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	repoRoot = filepath.Clean(filepath.Join(wd, "../.."))
	pluginBin = envOr("E2E_PLUGIN", filepath.Join(repoRoot, "bin/nri-cpupool"))
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		fmt.Println("e2e: skipped (needs root on Linux: it starts runtimes and writes cgroups)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestContainerd(t *testing.T) {
	tools := os.Getenv("E2E_TOOLS")
	if tools == "" {
		t.Skip("E2E_TOOLS is not set (make e2e sets it)")
	}
	runSuite(t, func(dir, tar string) Runtime {
		return newContainerd(filepath.Join(tools, "containerd"), containerdVersion(t, tools), runcPath(t), dir, image, tar)
	})
}

func TestContainerdOldest(t *testing.T) {
	dir := os.Getenv("E2E_CONTAINERD_OLD")
	if dir == "" {
		t.Skip("E2E_CONTAINERD_OLD is not set (make e2e builds the oldest supported containerd)")
	}
	runSuite(t, func(wd, tar string) Runtime {
		return newContainerd(filepath.Join(dir, "containerd"), containerdVersion(t, dir), runcPath(t), wd, image, tar)
	})
}

func runcPath(t *testing.T) string {
	r := os.Getenv("E2E_RUNC")
	if r == "" {
		t.Skip("E2E_RUNC (runc with seccomp) is not set")
	}
	return r
}

func containerdVersion(t *testing.T, dir string) string {
	out, err := exec.Command(filepath.Join(dir, "containerd"), "--version").Output()
	if err != nil {
		t.Fatalf("containerd --version: %v", err)
	}
	f := strings.Fields(string(out)) // containerd github.com/containerd/containerd/v2 v2.4.2 ...
	if len(f) < 3 {
		return strings.TrimSpace(string(out))
	}
	return f[2]
}

// env is one runtime under test with what every scenario needs.
type env struct {
	rt     Runtime
	dir    string
	cri    runtimeapi.RuntimeServiceClient
	top    string // the run's own cgroup tree
	online cpuset.CPUSet
	last   int // plays the isolated CPU (our machines have no isolcpus)
	rest   cpuset.CPUSet
}

// runSuite starts the runtime and runs every scenario against it.
func runSuite(t *testing.T, newRuntime func(dir, imageTar string) Runtime) {
	dir, err := os.MkdirTemp("", "nri-cpupool-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(dir, "busybox.tar")
	run(t, nil, "go", "run", filepath.Join(repoRoot, "tools/mkimage"), "-busybox", "/bin/busybox", "-name", image, "-out", tar)
	rt := newRuntime(dir, tar)
	e := &env{rt: rt, dir: dir, top: "nri-cpupool-e2e-" + runID + "-" + filepath.Base(dir)}
	online, err := readCPUs("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	e.online = online
	list := online.List()
	e.last = list[len(list)-1]
	e.rest = online.Difference(cpuset.New(e.last))
	t.Cleanup(func() {
		e.removeAllPods()
		rt.Stop()
		cleanupDir(dir)
		removeCgroupTree("/sys/fs/cgroup", e.top)
	})
	start := time.Now()
	rt.Start(t)
	conn, err := grpc.NewClient("unix://"+rt.CRISocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.cri = runtimeapi.NewRuntimeServiceClient(conn)
	t.Logf("%s started in %s; CPUs %s, CPU %d plays the isolated CPU", rt.Name(), time.Since(start).Round(time.Millisecond), online, e.last)
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			if n := online.Size(); n < s.minCPUs {
				t.Skipf("needs %d CPUs, this machine has %d", s.minCPUs, n)
			}
			s.run(e.begin(t))
		})
	}
}

func readCPUs(path string) (cpuset.CPUSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return cpuset.New(), err
	}
	return cpuset.Parse(strings.TrimSpace(string(data)))
}

func (e *env) removeAllPods() {
	if e.cri == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods, err := e.cri.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		e.cri.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id})
		e.cri.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
	}
}

// scenario is one end-to-end check, run against every runtime.
type scenario struct {
	name    string
	minCPUs int
	run     func(*tc)
}

// tc is one scenario's context: its directory, its plugin, its pods.
type tc struct {
	*testing.T
	e      *env
	dir    string
	plugin *pluginProc
	pods   []string
}

func (e *env) begin(t *testing.T) *tc {
	dir, err := os.MkdirTemp(e.dir, "t-")
	if err != nil {
		t.Fatal(err)
	}
	c := &tc{T: t, e: e, dir: dir}
	t.Cleanup(func() {
		if t.Failed() {
			c.report()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, id := range c.pods {
			e.cri.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
			e.cri.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
		}
		if c.plugin != nil {
			c.plugin.stop()
		}
	})
	return c
}

func (c *tc) report() {
	if c.plugin != nil {
		c.Logf("plugin log (last 40 lines):\n%s", tail(c.plugin.log, 40))
	}
	c.Logf("%s log (last 25 lines):\n%s", c.e.rt.Name(), c.e.rt.LogTail())
}

// eventually polls cond until it holds or 10 s passed.
func (c *tc) eventually(what string, cond func() (string, bool)) string {
	c.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, ok := cond()
		if ok {
			return got
		}
		if time.Now().After(deadline) {
			c.Fatalf("%s: still %q after 10s", what, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// equal checks a value; wantEventually waits for one.
func (c *tc) equal(what, got, want string) {
	c.Helper()
	if got != want {
		c.Errorf("%s: got %q, want %q", what, got, want)
	}
}

func (c *tc) wantEventually(what string, get func() string, want string) {
	c.Helper()
	c.eventually(what, func() (string, bool) { g := get(); return g, g == want })
}

func (c *tc) contains(what, text, needle string) {
	c.Helper()
	if !strings.Contains(text, needle) {
		c.Errorf("%s: %q does not contain %q", what, text, needle)
	}
}

func newUID(name string) string {
	return fmt.Sprintf("%s-%s-%d", runID, name, uidCounter.Add(1))
}
