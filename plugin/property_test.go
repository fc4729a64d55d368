package plugin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
)

// The property test drives the whole plugin over the real ttRPC adaptation
// library with random events, kills it at random points (including between
// its state write and its reply, after which the runtime creates the
// container unpinned) and restarts it from the same state file. After every
// step it checks, in the runtime's view:
//   - no CPU is held by two running containers, and no running container
//     is on an exclusive CPU (or its hidden sibling) it does not own;
//   - no exclusive container is ever moved once pinned;
//   - no running container is on a shared CPU unless it is a shared member;
//   - infra members and pod sandboxes are never on a held CPU;
//   - every running container is pinned (a non-empty cpuset);
//   - no exclusive container runs with a CFS quota, whichever way it was
//     placed;
//   - the state file equals the plugin's memory;
//   - each node's hugepages and memory counted are what the running
//     containers and the holds hold there, never negative, never more
//     hugepages than the node has (propHugePages, reserved on the node:
//     containers of the annotation route ask for some, and memory limits),
//     and an exclusive container's mems cover the nodes it holds memory of.
//
// Halfway through, the plugin is restarted with the kubelet device plugin
// on (property_kubelet_test.go): pods of cpupool.dev/exclusive are admitted
// with an Allocate per container, init container first, both for the same
// CPUs; their init containers complete and their app containers run; their
// sandboxes are re-created, the kubelet restarts (and re-admits pods that
// have not started), pods end while their containers still run, and the
// grants file is damaged while the plugin is down (when every pod of the
// resource runs its app container, so that few grants are lost). That half
// opens with one pod admitted and started, a kubelet restart and a damage,
// and a run of 300 events or more fails if it tested none of these. Then
// also:
//   - a container of the resource runs on exactly the CPUs the kubelet
//     allocated, and its token is bound to it;
//   - a pod of the resource is never refused for its own tokens unless its
//     grants were lost with the damaged file, and every such pod starts
//     once the CPUs are free (checked at the end);
//   - a CPU held by an exclusive container that shows no token is
//     advertised unhealthy;
//   - the grants file equals the plugin's memory.
//
// CPUPOOL_PROPERTY_EVENTS sets the number of events (make soak: 20000),
// CPUPOOL_PROPERTY_SEED the seed.
func TestPropertyWholePlugin(t *testing.T) {
	events := envInt("CPUPOOL_PROPERTY_EVENTS", 300)
	seed := uint64(envInt("CPUPOOL_PROPERTY_SEED", int(time.Now().UnixNano()%1_000_000)))
	t.Logf("seed %d (CPUPOOL_PROPERTY_SEED=%d reproduces), %d events", seed, seed, events)
	pt := newPropTest(t, seed)
	pt.switchAt = events / 2
	for pt.stats.events < events {
		pt.step()
		if pt.stats.events%2000 == 0 {
			t.Logf("property: %d events, %d kills, %d checks so far", pt.stats.events, pt.stats.kills, pt.stats.checks)
		}
	}
	pt.ensureUp()
	pt.check("end")
	pt.finishKube()
	summary := fmt.Sprintf("property: %d events, %d kills (%d between state write and reply), %d runtime restarts, %d invariant checks, %d creations refused, %d containers created unpinned (plugin down or reply lost), %d checks with hugepages held; kubelet route: %s; seed %d",
		pt.stats.events, pt.stats.kills, pt.stats.replyKills, pt.stats.runtimeRestarts, pt.stats.checks, pt.stats.refused, pt.stats.unpinned, pt.stats.hugePagesHeld, pt.kstats, seed)
	t.Log(summary)
	// make test and make soak print this line (go test hides a passing
	// test's output).
	if report := os.Getenv("CPUPOOL_PROPERTY_REPORT"); report != "" {
		require.NoError(t, os.WriteFile(report, []byte(summary+"\n"), 0o644))
	}
	if events >= 300 {
		pt.checkKubeCoverage()
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

type propStats struct {
	events, kills, replyKills, runtimeRestarts, checks, refused, unpinned int
	// hugePagesHeld counts the checks at which some hugepages were held:
	// reported, not required, since a seed may kill every such container
	// before a check (TestHugePagesFollowTheCPUs covers it for sure).
	hugePagesHeld int
}

type propTest struct {
	t     *testing.T
	rng   *rand.Rand
	f     *fakeRuntime
	state string
	rp    *runningPlugin // nil while the plugin is down
	// killNext arms the hook: the next persisted decision kills the plugin
	// before it replies.
	killNext atomic.Bool
	killed   atomic.Bool
	// pinnedAt remembers where each exclusive container was first pinned.
	pinnedAt map[string]string
	seq      int
	stats    propStats
	pods     []*api.PodSandbox
	trace    []string                  // the last events, for a failure report
	running  map[string]*api.Container // by id, as the runtime has them
	// node is the plugin's node and configuration; switchAt is the event at
	// which the device plugin is turned on (see property_kubelet_test.go).
	node     testNode
	switchAt int
	kubeModel
}

func newPropTest(t *testing.T, seed uint64) *propTest {
	pt := &propTest{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), f: newFakeRuntime(t, false),
		pinnedAt: map[string]string{}, running: map[string]*api.Container{}, node: desktop, kubeModel: newKubeModel()}
	pt.state = statePath(pt.f)
	dir := filepath.Join(pt.f.sysfsRoot(pt.node.fixture), "sys/devices/system/node/node0/hugepages/hugepages-2048kB")
	for _, file := range []string{"nr_hugepages", "free_hugepages"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.Itoa(propHugePages)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pt.start()
	return pt
}

// propHugePages are the pages of 2 MiB reserved on the property test's
// node.
const propHugePages = 24

func (pt *propTest) start() {
	pt.killed.Store(false)
	pt.rp = startPluginWith(pt.t, pt.f, pt.node, pt.state, func(rp *runningPlugin) {
		rp.p.log.SetLevel(logrus.WarnLevel)
		rp.p.beforeReply = func(event, id string) {
			if !pt.killNext.CompareAndSwap(true, false) {
				return
			}
			// kill -9 after the decision, before the reply: the connection
			// goes away under the handler, and the runtime proceeds
			// without the plugin.
			pt.killed.Store(true)
			rp.cancel()
			select {
			case err := <-rp.done:
				rp.done <- err
			case <-time.After(5 * time.Second):
			}
		}
	})
	pt.markLost()
}

func (pt *propTest) kill() {
	pt.rp.stop()
	pt.rp.p.Close()
	pt.rp = nil
	pt.stats.kills++
}

// ensureUp restarts a killed plugin and waits for its Synchronize.
func (pt *propTest) ensureUp() {
	if pt.killed.Load() && pt.rp != nil {
		pt.rp.stop()
		pt.rp.p.Close()
		pt.rp = nil
	}
	if pt.rp == nil {
		pt.start()
	}
}

var propPodKinds = []struct {
	ns  string
	ann map[string]string
	qos string
}{
	{"default", nil, "burstable"},
	{"default", nil, "burstable"},
	{"telco", map[string]string{"pool.cpupool.dev": "exclusive"}, ""},
	{"telco", map[string]string{"pool.cpupool.dev": "exclusive"}, ""},
	{"telco", map[string]string{"pool.cpupool.dev": "exclusive", "hide-hyperthreads.cpupool.dev": "true"}, ""},
	{"telco", map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}, ""},
	{"default", map[string]string{"pool.cpupool.dev": "shared"}, "burstable"},
	{"web", map[string]string{"pool.cpupool.dev": "exclusive"}, ""},                                    // refused: namespace
	{"telco", map[string]string{"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": "0-3000000"}, ""}, // refused: annotation
}

func (pt *propTest) note(format string, args ...any) {
	pt.trace = append(pt.trace, fmt.Sprintf("%d: ", pt.stats.events)+fmt.Sprintf(format, args...))
	if len(pt.trace) > 30 {
		pt.trace = pt.trace[1:]
	}
}

func (pt *propTest) step() {
	pt.stats.events++
	up := pt.rp != nil && !pt.killed.Load()
	r := pt.rng.IntN(100)
	pt.note("r=%d up=%v", r, up)
	switch {
	case !pt.kubeletMode && pt.stats.events >= pt.switchAt:
		pt.turnOnDevicePlugin()
	case pt.kubeletMode && pt.rng.IntN(4) == 0:
		pt.kubeStep()
	case r < 4 && up:
		pt.kill()
	case r < 10 && !up:
		pt.ensureUp()
	case r < 12:
		before := pt.f.restart()
		pt.stats.runtimeRestarts++
		if pt.rp != nil && !pt.killed.Load() {
			pt.f.waitSynced(before)
		}
	case r < 25 || len(pt.pods) == 0:
		pt.runPod()
	case r < 55:
		if up && pt.rng.IntN(8) == 0 {
			pt.killNext.Store(true)
		}
		pt.create(pt.pods[pt.rng.IntN(len(pt.pods))], "c"+strconv.Itoa(pt.rng.IntN(3)))
	case r < 60:
		pt.duplicateCreate()
	case r < 70:
		if up && pt.rng.IntN(8) == 0 {
			pt.killNext.Store(true)
		}
		pt.stop()
	case r < 80:
		pt.remove()
	case r < 85:
		pt.update()
	case r < 90:
		pt.restartContainer()
	default:
		pt.removePod()
	}
	pt.endKilled()
	if pt.rp != nil {
		pt.check(fmt.Sprintf("event %d", pt.stats.events))
	}
}

// endKilled ends a plugin that the hook killed before its reply.
func (pt *propTest) endKilled() {
	if pt.killed.Load() {
		pt.stats.replyKills++
		pt.stats.kills++
		pt.rp.stop()
		pt.rp.p.Close()
		pt.rp = nil
		pt.killed.Store(false)
	}
}

func (pt *propTest) runPod() {
	k := propPodKinds[pt.rng.IntN(len(propPodKinds))]
	pt.seq++
	if len(pt.pods) > 12 {
		pt.removePod()
	}
	pod := pt.f.runPod(podSpec{name: "p" + strconv.Itoa(pt.seq), namespace: k.ns, qos: k.qos, annotations: k.ann})
	pt.pods = append(pt.pods, pod)
}

// create makes a container the way the runtime does: with the plugins'
// adjustment if they give one, unpinned if no plugin answered. A container
// of the resource gets its token and its cpu: 10m (see createKube).
func (pt *propTest) create(pod *api.PodSandbox, name string) {
	if kp := pt.kube[pod.Uid]; kp != nil {
		pt.createKube(kp, name)
		return
	}
	pt.createWith(pod, name, []int64{0, 500, 1000, 2000, 3000}[pt.rng.IntN(5)], "")
}

// createWith creates a container with a CPU request of milli (as shares,
// and a quota as its limit) and env, if not empty; it returns the
// container, or nil and the error when it was refused.
func (pt *propTest) createWith(pod *api.PodSandbox, name string, milli int64, env string) (*api.Container, error) {
	for _, c := range pt.running {
		if c.PodSandboxId == pod.Id && c.Name == name {
			return nil, nil // one container of a name per pod at a time
		}
	}
	pt.seq++
	cpu := &api.LinuxCPU{Shares: api.UInt64(max(2, uint64(milli*1024/1000))), Period: api.UInt64(100000)}
	if milli > 0 {
		cpu.Quota = api.Int64(milli * 100)
	}
	ctr := &api.Container{Id: fmt.Sprintf("ctr%05d", pt.seq), PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{CgroupsPath: pod.Linux.CgroupParent + "/ctr" + strconv.Itoa(pt.seq), Resources: &api.LinuxResources{Cpu: cpu}}}
	if env == "" {
		// Hugepages and a memory limit (issue 31): counted for the
		// exclusive containers, refused when the node has no pages left.
		if pages := []uint64{0, 0, 4, 8}[pt.rng.IntN(4)]; pages > 0 {
			ctr.Linux.Resources.HugepageLimits = []*api.HugepageLimit{{PageSize: "2MB", Limit: pages << 21}}
		}
		ctr.Linux.Resources.Memory = &api.LinuxMemory{Limit: api.Int64(int64(pt.rng.IntN(3)) << 30)}
	}
	if env != "" {
		ctr.Env = []string{env}
	}
	block := pt.f.r.BlockPluginSync() // as containerd does; see fakeRuntime.createContainer
	defer block.Unblock()
	resp, err := pt.f.r.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: proto(ctr)})
	pt.note("create %s %s in %s (%s %v) %dm: %v %q", ctr.Id, name, pod.Name, pod.Namespace, pod.Annotations, milli, err, resp.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus())
	if err != nil {
		pt.stats.refused++
		return nil, err
	}
	pt.f.mu.Lock()
	defer pt.f.mu.Unlock()
	if cpus := resp.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus(); cpus != "" {
		ctr.Linux.Resources.Cpu.Cpus = cpus
		ctr.Linux.Resources.Cpu.Mems = resp.GetAdjust().GetLinux().GetResources().GetCpu().GetMems()
	} else {
		pt.stats.unpinned++
	}
	if q := resp.GetAdjust().GetLinux().GetResources().GetCpu().GetQuota(); q != nil {
		ctr.Linux.Resources.Cpu.Quota = api.Int64(q.GetValue())
	}
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	pt.f.ctrs[ctr.Id] = ctr
	pt.running[ctr.Id] = ctr
	pt.f.apply(resp.GetUpdate())
	return ctr, nil
}

// proto copies a container as the runtime sends it, so that the plugin's
// side never aliases the runtime's record.
func proto(c *api.Container) *api.Container {
	return gproto.Clone(c).(*api.Container)
}

func (pt *propTest) pick() *api.Container {
	if len(pt.running) == 0 {
		return nil
	}
	ids := make([]string, 0, len(pt.running))
	for id := range pt.running {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return pt.running[ids[pt.rng.IntN(len(ids))]]
}

func (pt *propTest) podOf(c *api.Container) *api.PodSandbox {
	pt.f.mu.Lock()
	defer pt.f.mu.Unlock()
	return pt.f.pods[c.PodSandboxId]
}

// duplicateCreate repeats CreateContainer for a running container, as a
// runtime may after a reconnect: the answer must not move it.
func (pt *propTest) duplicateCreate() {
	c := pt.pick()
	if c == nil || pt.rp == nil || pt.killed.Load() {
		return
	}
	pt.f.mu.Lock()
	snap := proto(c)
	pt.f.mu.Unlock()
	resp, err := pt.f.r.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pt.podOf(c), Container: snap})
	if err != nil {
		return // e.g. a container confined after its annotation was refused
	}
	pt.f.mu.Lock()
	defer pt.f.mu.Unlock()
	if got := resp.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus(); got != "" && pt.pinnedAt[c.Id] != "" {
		require.Equal(pt.t, pt.pinnedAt[c.Id], got, "a repeated CreateContainer moved %s", c.Id)
	}
	pt.f.apply(resp.GetUpdate())
}

func (pt *propTest) stop() {
	if c := pt.pick(); c != nil {
		pt.stopOne(c)
	}
}

func (pt *propTest) stopOne(c *api.Container) {
	pt.f.stopContainer(c)
	delete(pt.running, c.Id)
	delete(pt.pinnedAt, c.Id)
}

func (pt *propTest) remove() {
	c := pt.pick()
	if c == nil {
		// Remove a stopped one, if any.
		pt.f.mu.Lock()
		for _, x := range pt.f.ctrs {
			if x.State == api.ContainerState_CONTAINER_STOPPED {
				c = x
				break
			}
		}
		pt.f.mu.Unlock()
		if c == nil {
			return
		}
	}
	pt.f.removeContainer(c)
	delete(pt.running, c.Id)
	delete(pt.pinnedAt, c.Id)
}

// update asks for another cpuset, as the kubelet's CPU manager might.
func (pt *propTest) update() {
	c := pt.pick()
	if c == nil {
		return
	}
	want := []string{"0-15", "0", "4-5", "2-3"}[pt.rng.IntN(4)]
	resp, err := pt.f.r.UpdateContainer(context.Background(), &api.UpdateContainerRequest{Pod: pt.podOf(c), Container: proto(c),
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: want}}})
	if err != nil {
		return
	}
	pt.f.mu.Lock()
	defer pt.f.mu.Unlock()
	pt.f.apply(resp.GetUpdate())
}

// restartContainer stops a container and creates it again in its pod
// under the same name, as the kubelet does after a crash.
func (pt *propTest) restartContainer() {
	c := pt.pick()
	if c == nil {
		return
	}
	pod := pt.podOf(c)
	pt.stopOne(c)
	pt.f.removeContainer(c)
	pt.create(pod, c.Name)
}

func (pt *propTest) removePod() {
	if len(pt.pods) == 0 {
		return
	}
	pt.removePodAt(pt.rng.IntN(len(pt.pods)))
}

func (pt *propTest) removePodAt(i int) {
	pod := pt.pods[i]
	pt.pods = append(pt.pods[:i], pt.pods[i+1:]...)
	// The kubelet stops and removes the containers first, except when it
	// does not (RemovePodSandbox then frees them defensively).
	thorough := pt.rng.IntN(4) != 0
	pt.f.mu.Lock()
	var ctrs []*api.Container
	for _, c := range pt.f.ctrs {
		if c.PodSandboxId == pod.Id {
			ctrs = append(ctrs, c)
		}
	}
	pt.f.mu.Unlock()
	sort.Slice(ctrs, func(i, j int) bool { return ctrs[i].Id < ctrs[j].Id })
	for _, c := range ctrs {
		if thorough && c.State != api.ContainerState_CONTAINER_STOPPED {
			pt.f.stopContainer(c)
		}
		if thorough {
			pt.f.removeContainer(c)
		} else {
			pt.f.mu.Lock()
			delete(pt.f.ctrs, c.Id)
			pt.f.mu.Unlock()
		}
		delete(pt.running, c.Id)
		delete(pt.pinnedAt, c.Id)
	}
	pt.f.removePod(pod)
}

// check verifies the invariants against the runtime's view and the
// plugin's memory and state file.
func (pt *propTest) check(where string) {
	t := pt.t
	t.Helper()
	pt.stats.checks++
	p := pt.rp.p
	// The state is written in the background: let the writer catch up
	// before comparing the file with memory.
	if err := p.Flush(); err != nil {
		t.Fatalf("%s: flushing the state: %v", where, err)
	}
	p.mu.Lock()
	assignments := p.alloc.Assignments()
	persisted := make(map[string]state.ContainerState, len(p.memory.Containers))
	for k, v := range p.memory.Containers {
		persisted[k] = v
	}
	infra := p.alloc.PoolCPUs(pools.Infra)
	shared := p.alloc.Layout().Pool(pools.Shared)
	memUse, holds := p.alloc.MemoryUse(), p.alloc.Holds()
	p.mu.Unlock()

	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %s\nlast events:\n%s\nplugin log:\n%s", where, fmt.Sprintf(format, args...), strings.Join(pt.trace, "\n"), tail(pt.rp.log.String(), 3000))
	}
	// The state file equals memory.
	st, err := state.ReadState(pt.state)
	if err != nil {
		fail("state file: %v", err)
	}
	if len(st.Containers) != len(persisted) {
		fail("state file has %d containers, memory %d", len(st.Containers), len(persisted))
	}
	for id, want := range persisted {
		if got := st.Containers[id]; got != want {
			fail("state file says %+v for %s, memory %+v", got, id, want)
		}
	}
	byID := map[string]state.ContainerState{}
	for _, a := range assignments {
		byID[a.ID] = containerState(a)
		if persisted[a.ID] != byID[a.ID] {
			fail("persisted %+v differs from the allocator's %+v", persisted[a.ID], byID[a.ID])
		}
	}

	// The runtime's view.
	pt.f.mu.Lock()
	type view struct {
		id, pool string
		cpus     cpuset.CPUSet
		held     cpuset.CPUSet
	}
	var views []view
	for id, c := range pt.f.ctrs {
		if c.State != api.ContainerState_CONTAINER_RUNNING {
			continue
		}
		s := c.Linux.Resources.Cpu.Cpus
		if s == "" {
			pt.f.mu.Unlock()
			fail("container %s runs unpinned", id)
		}
		a, ok := byID[id]
		if !ok {
			pt.f.mu.Unlock()
			fail("running container %s (cpus %s) is unknown to the plugin", id, s)
		}
		cpus := mustParse(s)
		held := cpus
		if pools.IsExclusive(a.Pool) {
			held = held.Union(mustParse(a.Reserved))
			if q := c.Linux.Resources.Cpu.Quota; q != nil && q.GetValue() > 0 {
				pt.f.mu.Unlock()
				fail("exclusive container %s (%s) runs with a CFS quota of %d", id, a.Pool, q.GetValue())
			}
			if s != a.CPUs {
				pt.f.mu.Unlock()
				fail("exclusive container %s runs on %s, the plugin says %s", id, s, a.CPUs)
			}
			if was, ok := pt.pinnedAt[id]; ok && was != s {
				pt.f.mu.Unlock()
				fail("exclusive container %s moved from %s to %s", id, was, s)
			}
			pt.pinnedAt[id] = s
		}
		views = append(views, view{id, a.Pool, cpus, held})
	}
	pt.f.mu.Unlock()

	var exclusiveHeld []view
	for _, v := range views {
		if pools.IsExclusive(v.pool) {
			exclusiveHeld = append(exclusiveHeld, v)
		}
	}
	for _, v := range views {
		for _, x := range exclusiveHeld {
			if x.id != v.id && !x.held.Intersection(v.cpus).IsEmpty() {
				fail("container %s (%s, %s) runs on CPUs %s held by %s", v.id, v.pool, v.cpus, x.held.Intersection(v.cpus), x.id)
			}
		}
		if v.pool != pools.Shared && !pools.IsExclusive(v.pool) && !v.cpus.Intersection(shared).IsEmpty() {
			fail("container %s (%s) runs on shared CPUs %s", v.id, v.pool, v.cpus.Intersection(shared))
		}
		if v.pool == pools.Infra && !v.cpus.IsSubsetOf(infra) {
			fail("infra member %s on %s, outside infra %s", v.id, v.cpus, infra)
		}
	}
	// Sandboxes are pinned to infra, never on a held CPU.
	allHeld := cpuset.New()
	for _, x := range exclusiveHeld {
		allHeld = allHeld.Union(x.held)
	}
	for _, pod := range pt.pods {
		if s := pt.f.sandboxCPUs(pod); s != "" && !mustParse(s).Intersection(allHeld).IsEmpty() {
			fail("sandbox of %s on %s, held: %s", pod.Name, s, allHeld)
		}
	}
	pt.checkMemory(fail, assignments, holds, memUse)
	if pt.kubeletMode {
		pt.checkKube(fail)
	}
}

// checkMemory checks the per-node counts against what the containers and
// holds hold (issue 31).
func (pt *propTest) checkMemory(fail func(string, ...any), assignments []allocator.Assignment, holds []allocator.Hold, use []numamem.NodeMemoryUse) {
	want := map[int]numamem.NodeMemoryUse{}
	add := func(held []numamem.NodeMemory) {
		for _, nm := range held {
			u, ok := want[nm.Node]
			if !ok {
				u = numamem.NodeMemoryUse{Node: nm.Node, HugePages: map[int64]int64{}}
			}
			u.Memory += nm.Memory
			for _, pg := range nm.HugePages {
				u.HugePages[pg.SizeKB] += pg.Count
			}
			want[nm.Node] = u
		}
	}
	for _, a := range assignments {
		add(a.Memory)
		if len(a.Memory) > 0 && !cpusetOfMemory(a.Memory).IsSubsetOf(a.Mems) {
			fail("container %s holds memory of %v outside its mems %s", a.ID, a.Memory, a.Mems)
		}
	}
	for _, h := range holds {
		add(h.Memory)
	}
	for _, u := range use {
		if len(u.HugePages) > 0 {
			pt.stats.hugePagesHeld++
		}
		w := want[u.Node]
		if u.Memory < 0 || u.Memory != w.Memory {
			fail("node %d: %d bytes of memory counted, the containers and holds hold %d", u.Node, u.Memory, w.Memory)
		}
		for size, n := range u.HugePages {
			if n < 0 || n != w.HugePages[size] || (size == 2048 && n > propHugePages) {
				fail("node %d: %d pages of %d kB counted, the containers and holds hold %d, the node has %d", u.Node, n, size, w.HugePages[size], propHugePages)
			}
		}
		delete(want, u.Node)
	}
	for n, w := range want {
		if w.Memory != 0 || len(w.HugePages) > 0 {
			fail("node %d: nothing counted, the containers and holds hold %+v", n, w)
		}
	}
}

func cpusetOfMemory(held []numamem.NodeMemory) cpuset.CPUSet {
	var ids []int
	for _, nm := range held {
		ids = append(ids, nm.Node)
	}
	return cpuset.New(ids...)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
