package plugin

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// fakeRuntime plays the container runtime with the real runtime-side NRI
// library over a real ttRPC socket, and keeps containers' cpusets as a
// runtime would after applying adjustments and updates.
type fakeRuntime struct {
	t          testing.TB
	dir        string
	socket     string
	cgroupRoot string
	r          *adaptation.Adaptation

	mu    sync.Mutex
	pods  map[string]*api.PodSandbox
	ctrs  map[string]*api.Container
	syncs int
	// syncUpdates are the updates plugins returned from Synchronize.
	syncUpdates []*api.ContainerUpdate
	// updateDelay holds unsolicited updates back before applying them, as
	// a busy runtime may.
	updateDelay time.Duration
	// settle, when set, waits for the running plugin's sandbox pins: what
	// sandboxCPUs reads is what the plugin has settled on.
	settle func()
	// profileRounds, when set, starts profiles of the plugin behind this
	// runtime as measureRounds' measured rounds start and returns what
	// ends them (benchDaemon.profile: the real binary's, through its
	// --pprof-address). rounds tells how many rounds have ended so far,
	// so that a profile can say how many it covers.
	profileRounds func(rounds func() int64) func()
	// proxy forwards plugin connections from socket to the adaptation's own
	// socket, so that a restart can cut them as a dying runtime process
	// does (Adaptation.Stop leaves external plugins connected).
	proxy *connProxy
	// sysfsRoots are the node's sysfs trees by fixture, written once: a
	// plugin restarted on this node finds the files as the last one left
	// them (power classes change some).
	sysfsRoots map[string]string
	// dress, when set, completes each container before its creation, as
	// a pod spec does (hugepage and memory limits).
	dress func(*api.Container)
}

// connProxy relays unix socket connections and can cut them all.
type connProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

func newConnProxy(t testing.TB, socket, target string) *connProxy {
	l, err := net.Listen("unix", socket)
	require.NoError(t, err)
	p := &connProxy{l: l, target: target}
	t.Cleanup(func() { l.Close(); p.cut() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close(); c.Close() }()
			go func() { io.Copy(c, up); up.Close(); c.Close() }()
		}
	}()
	return p
}

// cut closes every relayed connection.
func (p *connProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func newFakeRuntime(t testing.TB, unified bool) *fakeRuntime {
	dir, err := os.MkdirTemp("", "nri-cpupool-it-") // short: unix socket paths are limited
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fakeRuntime{t: t, dir: dir, socket: filepath.Join(dir, "nri.sock"), cgroupRoot: filepath.Join(dir, "cgroup"),
		pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{}, sysfsRoots: map[string]string{}}
	require.NoError(t, os.MkdirAll(f.cgroupRoot, 0o755))
	if unified {
		require.NoError(t, os.WriteFile(filepath.Join(f.cgroupRoot, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644))
	}
	f.proxy = newConnProxy(t, f.socket, f.runtimeSocket())
	f.start()
	return f
}

// sysfsRoot is the node's sysfs tree of a fixture shape.
func (f *fakeRuntime) sysfsRoot(shape string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if root, ok := f.sysfsRoots[shape]; ok {
		return root
	}
	root := fixture.Root(f.t, shape)
	f.sysfsRoots[shape] = root
	return root
}

// procRoot is the node's /proc for the plugin: a fixture tree that tests
// of IRQ isolation write (procfixture); absent otherwise.
func (f *fakeRuntime) procRoot() string { return filepath.Join(f.dir, "proc") }

// runtimeSocket is where the adaptation listens, behind the proxy.
func (f *fakeRuntime) runtimeSocket() string { return filepath.Join(f.dir, "rt.sock") }

// pluginDir and pluginConfigDir are where the runtime launches plugins
// from and finds their configuration.
func (f *fakeRuntime) pluginDir() string       { return filepath.Join(f.dir, "plugins") }
func (f *fakeRuntime) pluginConfigDir() string { return filepath.Join(f.dir, "conf.d") }

func (f *fakeRuntime) start() {
	for _, d := range []string{f.pluginDir(), f.pluginConfigDir()} {
		require.NoError(f.t, os.MkdirAll(d, 0o755))
	}
	r, err := adaptation.New("fake-runtime", "v0", f.synchronize, f.update,
		adaptation.WithSocketPath(f.runtimeSocket()), adaptation.WithPluginPath(f.pluginDir()), adaptation.WithPluginConfigPath(f.pluginConfigDir()))
	require.NoError(f.t, err)
	require.NoError(f.t, r.Start())
	f.r = r
}

// restart stops the runtime side and brings up a new one on the same
// socket, as a containerd restart does. It returns the synchronization
// count once the new runtime is up (its start synchronizes pre-installed
// plugins, even none), for waitSynced to wait for the plugin's reconnect.
func (f *fakeRuntime) restart() int {
	f.r.Stop()
	f.proxy.cut()
	os.Remove(f.runtimeSocket())
	f.start()
	return f.syncCount()
}

func (f *fakeRuntime) synchronize(ctx context.Context, cb adaptation.SyncCB) error {
	// Copies, taken under mu: the runtime library marshals them outside
	// it, while a push from the plugin's previous connection may still be
	// applied to the originals (a data race under -race).
	f.mu.Lock()
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for _, p := range f.pods {
		pods = append(pods, gproto.Clone(p).(*api.PodSandbox))
	}
	for _, c := range f.ctrs {
		ctrs = append(ctrs, proto(c))
	}
	f.mu.Unlock()
	updates, err := cb(ctx, pods, ctrs)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs++
	f.syncUpdates = updates
	f.apply(updates)
	return nil
}

func (f *fakeRuntime) update(_ context.Context, u []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	f.mu.Lock()
	delay := f.updateDelay
	f.mu.Unlock()
	time.Sleep(delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.apply(u)
	return nil, nil
}

// apply records updated cpusets; caller holds mu.
func (f *fakeRuntime) apply(updates []*api.ContainerUpdate) {
	for _, u := range updates {
		if c, ok := f.ctrs[u.GetContainerId()]; ok {
			if cpus := u.GetLinux().GetResources().GetCpu().GetCpus(); cpus != "" {
				c.Linux.Resources.Cpu.Cpus = cpus
			}
			if mems := u.GetLinux().GetResources().GetCpu().GetMems(); mems != "" {
				c.Linux.Resources.Cpu.Mems = mems
			}
			if q := u.GetLinux().GetResources().GetCpu().GetQuota(); q != nil {
				c.Linux.Resources.Cpu.Quota = api.Int64(q.GetValue())
			}
		}
	}
}

func (f *fakeRuntime) syncCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// waitSynced waits until a plugin has synchronized more than n times.
func (f *fakeRuntime) waitSynced(n int) {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for f.syncCount() <= n {
		if time.Now().After(deadline) {
			f.t.Fatalf("plugin did not synchronize (syncs: %d)", f.syncCount())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The runtime registers a plugin only after its Synchronize returns;
	// wait for that too, as an event sent earlier would miss the plugin.
	f.r.BlockPluginSync().Unblock()
}

type podSpec struct {
	name, namespace, qos string
	annotations          map[string]string
	// systemd names the sandbox cgroup the systemd driver's way
	// (slice:prefix:name); v1 or v2 is the fake runtime's choice.
	systemd bool
	// crio lays cgroups out as CRI-O does with cgroupfs: <parent>/crio-<id>.
	crio bool
	// The pod cgroup (the cgroup parent) gets the kubelet's CFS quota for a
	// Guaranteed pod of cpu: 10m, unless the pod has no cpu controller or
	// the runtime reports no pod cgroup (its cgroup parent is empty).
	noCPUController, noPodCgroup bool
}

// kubeletPodQuota is the CFS quota the kubelet puts on the cgroup of a pod
// whose CPU limits add up to 10m (cpu.max on cgroup v2).
const kubeletPodQuota = "1000 100000"

// runPod creates a pod sandbox with a cgroup, as the runtime would.
func (f *fakeRuntime) runPod(spec podSpec) *api.PodSandbox {
	f.t.Helper()
	if spec.namespace == "" {
		spec.namespace = "default"
	}
	uid := "uid-" + spec.name
	id := "sb-" + spec.name
	parent := "/kubepods/pod" + uid
	if spec.qos != "" && spec.qos != "guaranteed" {
		parent = "/kubepods/" + spec.qos + "/pod" + uid
	}
	cgroupsPath := parent + "/" + id
	if spec.crio {
		cgroupsPath = parent + "/crio-" + id
	}
	dir := cgroupsPath
	if spec.systemd {
		parent = "kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
		cgroupsPath = parent + ":cri-containerd:" + id
		d, err := cgroupDir(cgroupsPath)
		require.NoError(f.t, err)
		dir = d
	}
	f.mkCgroup(dir)
	f.mkPodQuota(parent, spec)
	if spec.noPodCgroup {
		parent = ""
	}
	pod := &api.PodSandbox{Id: id, Name: spec.name, Uid: uid, Namespace: spec.namespace, Annotations: spec.annotations,
		Linux: &api.LinuxPodSandbox{CgroupParent: parent, CgroupsPath: cgroupsPath}}
	f.mu.Lock()
	f.pods[id] = pod
	f.mu.Unlock()
	require.NoError(f.t, f.r.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: pod}))
	return pod
}

func (f *fakeRuntime) hierarchy() string {
	if _, err := os.Stat(filepath.Join(f.cgroupRoot, "cgroup.controllers")); err == nil {
		return f.cgroupRoot
	}
	return filepath.Join(f.cgroupRoot, "cpuset")
}

func (f *fakeRuntime) mkCgroup(dir string) {
	path := filepath.Join(f.hierarchy(), dir)
	require.NoError(f.t, os.MkdirAll(path, 0o755))
	require.NoError(f.t, os.WriteFile(filepath.Join(path, "cpuset.cpus"), nil, 0o644))
	require.NoError(f.t, os.WriteFile(filepath.Join(path, "cpuset.mems"), nil, 0o644))
}

// mkPodQuota writes the kubelet's CFS quota into the pod cgroup, as the
// kubelet does before it runs the pod's sandbox: cpu.max on v2, the cpu
// hierarchy's cpu.cfs_quota_us and cpu.cfs_period_us on v1.
func (f *fakeRuntime) mkPodQuota(parent string, spec podSpec) {
	if spec.noCPUController || spec.noPodCgroup {
		return
	}
	dir, err := podCgroupDir(parent)
	require.NoError(f.t, err)
	if f.hierarchy() == f.cgroupRoot {
		require.NoError(f.t, os.WriteFile(filepath.Join(f.cgroupRoot, dir, "cpu.max"), []byte(kubeletPodQuota+"\n"), 0o644))
		return
	}
	path := filepath.Join(f.cgroupRoot, "cpu", dir)
	require.NoError(f.t, os.MkdirAll(path, 0o755))
	quota, period, _ := strings.Cut(kubeletPodQuota, " ")
	require.NoError(f.t, os.WriteFile(filepath.Join(path, "cpu.cfs_quota_us"), []byte(quota+"\n"), 0o644))
	require.NoError(f.t, os.WriteFile(filepath.Join(path, "cpu.cfs_period_us"), []byte(period+"\n"), 0o644))
}

// settleSandboxes waits until the plugin has done every sandbox round it
// was asked for (pins and pod quotas are written in the background).
func (f *fakeRuntime) settleSandboxes() {
	f.mu.Lock()
	settle := f.settle
	f.mu.Unlock()
	if settle != nil {
		settle()
	}
}

// sandboxCPUs reads what the plugin wrote into a sandbox's cgroup, once it
// has pinned every sandbox it was asked to (it pins in the background).
func (f *fakeRuntime) sandboxCPUs(pod *api.PodSandbox) string {
	f.t.Helper()
	f.settleSandboxes()
	dir, err := cgroupDir(pod.Linux.CgroupsPath)
	require.NoError(f.t, err)
	b, err := os.ReadFile(filepath.Join(f.hierarchy(), dir, "cpuset.cpus"))
	require.NoError(f.t, err)
	return strings.TrimSpace(string(b))
}

// createContainer asks plugins about a new container with a CPU request in
// milli-CPUs (as cpu.shares, the way the kubelet passes it).
func (f *fakeRuntime) createContainer(pod *api.PodSandbox, name string, milli int64) (*api.Container, *api.CreateContainerResponse, error) {
	return f.createAttempt(pod, name, 0, milli)
}

// createAttempt creates a container's run the way the kubelet restarts
// it: same pod, same name, a new id for each attempt.
func (f *fakeRuntime) createAttempt(pod *api.PodSandbox, name string, attempt int, milli int64) (*api.Container, *api.CreateContainerResponse, error) {
	shares := uint64(2)
	if milli > 0 {
		shares = uint64(milli * 1024 / 1000)
	}
	id := "ctr-" + pod.Name + "-" + name
	if attempt > 0 {
		id += fmt.Sprintf("-%d", attempt)
	}
	ctr := &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_CREATED,
		Annotations: map[string]string{"io.kubernetes.container.restartCount": fmt.Sprint(attempt)},
		Linux: &api.LinuxContainer{CgroupsPath: pod.Linux.CgroupParent + "/" + id,
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(shares), Period: api.UInt64(100000)}}}}
	if f.dress != nil {
		f.dress(ctr)
	}
	// Like containerd, hold plugin synchronization off until the container
	// is recorded: a plugin registering meanwhile would miss it.
	block := f.r.BlockPluginSync()
	defer block.Unblock()
	resp, err := f.r.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if cpus := resp.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus(); cpus != "" {
		ctr.Linux.Resources.Cpu.Cpus = cpus
		ctr.Linux.Resources.Cpu.Mems = resp.GetAdjust().GetLinux().GetResources().GetCpu().GetMems()
	}
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	f.ctrs[ctr.Id] = ctr
	f.apply(resp.GetUpdate())
	return ctr, resp, nil
}

func (f *fakeRuntime) stopContainer(ctr *api.Container) []*api.ContainerUpdate {
	f.t.Helper()
	f.mu.Lock()
	pod := f.pods[ctr.PodSandboxId]
	snap := proto(ctr) // as in synchronize: marshaled outside mu
	f.mu.Unlock()
	resp, err := f.r.StopContainer(context.Background(), &api.StopContainerRequest{Pod: pod, Container: snap})
	require.NoError(f.t, err)
	f.mu.Lock()
	defer f.mu.Unlock()
	ctr.State = api.ContainerState_CONTAINER_STOPPED
	f.apply(resp.GetUpdate())
	return resp.GetUpdate()
}

// exitContainer reports a container's own exit, as containerd does when
// its task exits: a stop with the finish time and the exit code.
func (f *fakeRuntime) exitContainer(ctr *api.Container, code int32) []*api.ContainerUpdate {
	f.t.Helper()
	f.mu.Lock()
	ctr.FinishedAt, ctr.ExitCode = time.Now().UnixNano(), code
	f.mu.Unlock()
	return f.stopContainer(ctr)
}

// stopPod stops a pod sandbox (the kubelet does when the pod is deleted
// or has finished); it stays listed until removed.
func (f *fakeRuntime) stopPod(pod *api.PodSandbox) {
	f.t.Helper()
	require.NoError(f.t, f.r.StopPodSandbox(context.Background(), &api.StopPodSandboxRequest{Pod: pod}))
}

func (f *fakeRuntime) removeContainer(ctr *api.Container) {
	f.t.Helper()
	f.mu.Lock()
	pod := f.pods[ctr.PodSandboxId]
	delete(f.ctrs, ctr.Id)
	f.mu.Unlock()
	require.NoError(f.t, f.r.RemoveContainer(context.Background(), &api.RemoveContainerRequest{Pod: pod, Container: ctr}))
}

func (f *fakeRuntime) removePod(pod *api.PodSandbox) {
	f.t.Helper()
	f.mu.Lock()
	delete(f.pods, pod.Id)
	f.mu.Unlock()
	require.NoError(f.t, f.r.StopPodSandbox(context.Background(), &api.StopPodSandboxRequest{Pod: pod}))
	require.NoError(f.t, f.r.RemovePodSandbox(context.Background(), &api.RemovePodSandboxRequest{Pod: pod}))
}

// setCPUs changes a container's cpuset in the runtime's view, as an
// outside actor (or a creation without the plugin's adjustment) would.
func (f *fakeRuntime) setCPUs(ctr *api.Container, cpus string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ctr.Linux.Resources.Cpu.Cpus = cpus
}

// cpus returns a container's cpuset as the runtime has it now.
func (f *fakeRuntime) cpus(ctr *api.Container) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ctr.Linux.Resources.Cpu.Cpus
}

// runningPlugin is a plugin process: New plus Run in a goroutine.
type runningPlugin struct {
	p      *Plugin
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	log    syncBuffer
	// hooks, set by a setup, are passed to Run.
	hooks Hooks
}

// syncBuffer collects a plugin's log for assertions.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testNode struct {
	fixture string
	config  string
}

func startPlugin(t testing.TB, f *fakeRuntime, node testNode, stateFile string, opts ...func(*Plugin)) *runningPlugin {
	t.Helper()
	return startPluginWith(t, f, node, stateFile, func(rp *runningPlugin) {
		for _, o := range opts {
			o(rp.p)
		}
	})
}

// startPluginWith is startPlugin with a chance to adjust the plugin (test
// hooks, log level) before it connects.
func startPluginWith(t testing.TB, f *fakeRuntime, node testNode, stateFile string, setup func(*runningPlugin)) *runningPlugin {
	t.Helper()
	return startPluginSetUp(t, f, node, stateFile, nil, setup)
}

// startPluginTuned starts a plugin after tune has adjusted it (e.g. its
// state writer's timing).
func startPluginTuned(t testing.TB, f *fakeRuntime, node testNode, stateFile string, tune func(*Plugin)) *runningPlugin {
	t.Helper()
	return startPluginSetUp(t, f, node, stateFile, tune, nil)
}

func startPluginSetUp(t testing.TB, f *fakeRuntime, node testNode, stateFile string, tune func(*Plugin), setup func(*runningPlugin)) *runningPlugin {
	t.Helper()
	cfg, err := config.Parse(strings.NewReader(node.config), "test config")
	require.NoError(t, err)
	cfg.SysfsRoot = f.sysfsRoot(node.fixture)
	cfg.CgroupRoot = f.cgroupRoot
	cfg.ProcRoot = f.procRoot()
	cfg.StateFile = stateFile
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	require.NoError(t, err)
	rp := &runningPlugin{done: make(chan error, 1)}
	log := logrus.New()
	log.SetOutput(&rp.log)
	if testing.Verbose() {
		log.SetOutput(io.MultiWriter(&rp.log, os.Stderr))
	}
	p, err := New(cfg, topo, state.NewFileStore(stateFile), log)
	require.NoError(t, err)
	// The fake runtime embeds this module's NRI (go.mod); test binaries do
	// not report it in their build info.
	p.assumeNRIVersion = "v0.12.5"
	// The fake sysfs tree has no uevents: the host's would be heard
	// otherwise (a test gives its own).
	p.hotplug.uevents = make(chan cpuUevent)
	if tune != nil {
		tune(p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rp.p, rp.cancel = p, cancel
	if setup != nil {
		setup(rp)
	}
	before := f.syncCount()
	f.mu.Lock()
	f.settle = p.waitSandboxesPinned
	f.mu.Unlock()
	go func() {
		rp.done <- p.Run(ctx, f.socket, Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}, rp.hooks)
	}()
	f.waitSynced(before)
	t.Cleanup(rp.stop)
	return rp
}

// stop ends the plugin as a kill -9 at a quiet moment would: the state
// file has caught up with the decisions, and the runtime hears no goodbye.
func (rp *runningPlugin) stop() {
	rp.once.Do(func() {
		rp.p.waitSandboxesPinned()
		if err := rp.p.Flush(); err != nil {
			panic(err)
		}
		rp.halt()
	})
}

// kill ends the plugin as a kill -9 right after its last reply would:
// what the state writer has not written yet is lost.
func (rp *runningPlugin) kill() {
	rp.once.Do(rp.halt)
}

func (rp *runningPlugin) halt() {
	rp.p.writer.crash()
	rp.p.stopPinning()    // a dead process pins nothing more
	rp.p.closeIsolation() // nor writes host files
	rp.cancel()
	select {
	case <-rp.done:
	case <-time.After(5 * time.Second):
	}
}

// savedState is the state file once the writer has caught up.
func (rp *runningPlugin) savedState(t testing.TB) *state.State {
	t.Helper()
	require.NoError(t, rp.p.Flush())
	st, err := state.ReadState(rp.p.cfg.StateFile)
	require.NoError(t, err)
	return st
}

func envOf(resp *api.CreateContainerResponse) map[string]string {
	out := map[string]string{}
	for _, e := range resp.GetAdjust().GetEnv() {
		out[e.Key] = e.Value
	}
	return out
}

func id(i int) string { return fmt.Sprintf("%03d", i) }

func mustParse(s string) cpuset.CPUSet {
	set, err := cpuset.Parse(s)
	if err != nil {
		panic(err)
	}
	return set
}

// buildBinary builds bin/nri-cpupool into a temporary directory, or
// returns the one make unit built (prebuiltDir).
func buildBinary(tb testing.TB) string {
	tb.Helper()
	if dir, ok := prebuiltDir(tb, "nri-cpupool"); ok {
		return filepath.Join(dir, "nri-cpupool")
	}
	bin := filepath.Join(tb.TempDir(), "nri-cpupool")
	build := exec.Command("go", "build", "-o", bin, "../cmd/nri-cpupool")
	build.Stderr = os.Stderr
	require.NoError(tb, build.Run())
	return bin
}

// buildBinaries builds bin/nri-cpupool and bin/nri-cpupool-dra into a
// temporary directory and returns nri-cpupool's path: with dra.enabled,
// it execs its sibling. Or it returns the ones make unit built.
func buildBinaries(tb testing.TB) string {
	tb.Helper()
	if dir, ok := prebuiltDir(tb, "nri-cpupool", "nri-cpupool-dra"); ok {
		return filepath.Join(dir, "nri-cpupool")
	}
	dir := tb.TempDir()
	for pkg, name := range map[string]string{"../cmd/nri-cpupool": "nri-cpupool", "../cmd/nri-cpupool/nri-cpupool-dra": "nri-cpupool-dra"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		build.Stderr = os.Stderr
		require.NoError(tb, build.Run())
	}
	return filepath.Join(dir, "nri-cpupool")
}

// prebuiltDir is $NRI_CPUPOOL_TEST_BINDIR, where make unit has its build
// target put the binaries from this tree just before go test. Each test
// that runs the real daemon linked its own otherwise (the DRA one also
// nri-cpupool-dra, with the Kubernetes client libraries): in CI that was
// most of those tests' time, and make test builds them anyway. Unset (a
// plain go test), the tests build their own as before; set, the binaries
// must be there: a stale or missing directory is an error, never a quiet
// fallback.
func prebuiltDir(tb testing.TB, names ...string) (string, bool) {
	tb.Helper()
	dir := os.Getenv("NRI_CPUPOOL_TEST_BINDIR")
	if dir == "" {
		return "", false
	}
	for _, name := range names {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(tb, err, "NRI_CPUPOOL_TEST_BINDIR=%s: run make build first, or unset it", dir)
		require.False(tb, st.IsDir(), "NRI_CPUPOOL_TEST_BINDIR=%s: %s is a directory", dir, name)
	}
	return dir, true
}
