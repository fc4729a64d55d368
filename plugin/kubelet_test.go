package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/deviceplugin"
)

// desktopKubelet is desktop with the device plugin on.
var desktopKubelet = testNode{fixture: desktop.fixture, config: desktop.config + `
kubelet: {devicePlugin: true}
`}

// createWithEnv creates a container whose environment is env, as the
// kubelet builds it (the device plugin's variables plus the pod spec's).
func (f *fakeRuntime) createWithEnv(pod *api.PodSandbox, name string, milli int64, env ...string) (*api.Container, *api.CreateContainerResponse, error) {
	shares := uint64(2)
	if milli > 0 {
		shares = uint64(milli * 1024 / 1000)
	}
	ctr := &api.Container{Id: "ctr-" + pod.Name + "-" + name, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_CREATED, Env: env,
		Linux: &api.LinuxContainer{CgroupsPath: pod.Linux.CgroupParent + "/ctr-" + pod.Name + "-" + name,
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(shares), Period: api.UInt64(100000)}}}}
	f.mu.Lock()
	if f.dress != nil {
		f.dress(ctr)
	}
	f.mu.Unlock()
	resp, err := f.r.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	if err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ctr.Linux.Resources.Cpu.Cpus = resp.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus()
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	f.ctrs[ctr.Id] = ctr
	f.apply(resp.GetUpdate())
	return ctr, resp, nil
}

func grantEnv(t *testing.T, p *Plugin, ids ...string) string {
	t.Helper()
	env, err := p.Grant(ids)
	require.NoError(t, err)
	require.Len(t, env[EnvGrant], 32)
	return EnvGrant + "=" + env[EnvGrant]
}

func healthOf(devs []deviceplugin.Device) string {
	var b strings.Builder
	for _, d := range devs {
		if !d.Healthy {
			b.WriteString("!")
		}
		fmt.Fprintf(&b, "%s@%d ", d.ID, d.NUMA)
	}
	return strings.TrimSpace(b.String())
}

// TestResourceRoutePinsKubeletCPUs: a container of the resource gets
// exactly the CPUs the kubelet allocated, with no annotation and no CPU
// request; a restart of the container (same token) gets them again; the
// pod's removal forgets the grant.
func TestResourceRoutePinsKubeletCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	assert.Equal(t, "4@0 5@0 6@0 7@0 12@0 13@0 14@0 15@0", healthOf(p.Devices()))

	env := grantEnv(t, p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	ctr, resp, err := f.createWithEnv(pod, "app", 0, "PATH=/bin", env)
	require.NoError(t, err)
	assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	assert.Equal(t, "exclusive", envOf(resp)[EnvPool])
	assert.Equal(t, "4@0 5@0 6@0 7@0 12@0 13@0 14@0 15@0", healthOf(p.Devices()), "kubelet-allocated CPUs stay healthy: the kubelet accounts for them")

	// The kubelet restarts the container with its cached Allocate response.
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	_, resp, err = f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)

	f.removePod(pod)
	p.mu.Lock()
	assert.Empty(t, p.grants.byToken, "the removed pod's grant is forgotten")
	p.mu.Unlock()
	require.NoError(t, p.Flush())
	reloaded, err := loadGrants(GrantsFile(statePath(f)), time.Now())
	require.NoError(t, err)
	assert.Empty(t, reloaded.byToken, "and the file says so once the writer wrote it")
}

// TestGrantCannotBeForged: the token comes only from the daemon, is bound
// to the first container that shows it, and a pod annotation with the same
// key means nothing.
func TestGrantCannotBeForged(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	env := grantEnv(t, p, "4")
	token := strings.TrimPrefix(env, EnvGrant+"=")

	owner := f.runPod(podSpec{name: "owner", namespace: "telco"})
	_, resp, err := f.createWithEnv(owner, "app", 0, env)
	require.NoError(t, err)
	assert.Equal(t, "4", resp.Adjust.Linux.Resources.Cpu.Cpus)

	tests := []struct {
		name string
		ann  map[string]string
		env  []string
		want string // "" = created, not exclusive
	}{
		{"guess", nil, []string{EnvGrant + "=0123456789abcdef0123456789abcdef"}, "unknown grant token"},
		{"replay", nil, []string{env}, "the grant belongs to container telco/owner/app"},
		{"twice", nil, []string{env, EnvGrant + "=x"}, "set 2 times"},
		{"long", nil, []string{EnvGrant + "=" + strings.Repeat("a", 1<<16)}, "not a grant token"},
		{"annotation", map[string]string{EnvGrant: token, "cpupool.dev/" + EnvGrant: token}, nil, "unknown annotation"},
		{"annotation-plain", map[string]string{EnvGrant: token}, nil, ""},
	}
	for _, tc := range tests {
		pod := f.runPod(podSpec{name: tc.name, namespace: "telco", annotations: tc.ann})
		_, resp, err := f.createWithEnv(pod, "app", 0, tc.env...)
		if tc.want == "" {
			require.NoError(t, err, tc.name)
			assert.Equal(t, "infra", envOf(resp)[EnvPool], "%s: a pod annotation grants nothing", tc.name)
			continue
		}
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		assert.LessOrEqual(t, len(err.Error()), 400, "%s: errors echo only a short prefix", tc.name)
	}
	// Another container of the owner's pod cannot share the grant either.
	_, _, err = f.createWithEnv(owner, "sidecar", 0, env)
	require.ErrorContains(t, err, "the grant belongs to container telco/owner/app")
}

// TestAnnotationRouteWithDevicePlugin: with the device plugin on, an
// annotation asking for the exclusive pool is refused with a message saying
// how to ask instead; Guaranteed pods under guaranteedExclusive go to
// exclusive-non-isolcpus, which the scheduler counts in allocatable cpu.
func TestAnnotationRouteWithDevicePlugin(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, testNode{fixture: desktop.fixture, config: desktopKubelet.config + "guaranteedExclusive: true\n"}, statePath(f))
	pod := f.runPod(podSpec{name: "ann", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err := f.createContainer(pod, "app", 2000)
	require.ErrorContains(t, err, "request cpupool.dev/exclusive: N in resources.limits instead")

	g := f.runPod(podSpec{name: "gu", namespace: "telco", qos: "guaranteed"})
	_, resp, err := f.createContainer(g, "app", 1000)
	require.NoError(t, err)
	assert.Equal(t, "exclusive-non-isolcpus", envOf(resp)[EnvPool])
}

// TestGrantRefusesHeldCPUs: an exclusive container from before the device
// plugin was turned on keeps its CPUs; they are advertised unhealthy and the
// kubelet cannot be granted them.
func TestGrantRefusesHeldCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	state := statePath(f)
	rp := startPlugin(t, f, desktop, state)
	pod := f.runPod(podSpec{name: "old", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, resp, err := f.createContainer(pod, "app", 2000)
	require.NoError(t, err)
	held := resp.Adjust.Linux.Resources.Cpu.Cpus
	rp.stop()

	rp = startPlugin(t, f, desktopKubelet, state)
	devs := healthOf(rp.p.Devices())
	for _, cpu := range mustParse(held).List() {
		assert.Contains(t, devs, fmt.Sprintf("!%d@", cpu), "CPU %d is held by an annotated container", cpu)
	}
	_, err = rp.p.Grant([]string{fmt.Sprint(mustParse(held).List()[0])})
	require.ErrorContains(t, err, "held by containers the kubelet did not allocate them to ([telco/old/app])")
	_, err = rp.p.Grant([]string{"1"})
	require.ErrorContains(t, err, `device "1" is not a CPU of the exclusive pool`)
}

// TestGrantRace: the kubelet allocating CPUs while containers of earlier
// grants are being created never puts two running containers on one CPU.
func TestGrantRace(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cpu := []string{"4", "5", "12", "13"}[i%4]
			env, err := p.Grant([]string{cpu})
			if err != nil {
				return // held by a container created in the meantime
			}
			pod := f.runPod(podSpec{name: "race" + id(i), namespace: "telco"})
			f.createWithEnv(pod, "app", 0, EnvGrant+"="+env[EnvGrant])
		}()
	}
	wg.Wait()
	seen := map[int]string{}
	f.mu.Lock()
	defer f.mu.Unlock()
	running := 0
	for _, c := range f.ctrs {
		set, err := cpuset.Parse(c.Linux.Resources.Cpu.Cpus)
		require.NoError(t, err)
		for _, cpu := range set.List() {
			require.Empty(t, seen[cpu], "CPU %d given to %s and %s", cpu, seen[cpu], c.Id)
			seen[cpu] = c.Id
		}
		running++
	}
	assert.Equal(t, 4, running, "each of the 4 CPUs ends up with exactly one container")
}

// TestPreferredFollowsPlacementRules: on two NUMA nodes the kubelet is
// told to keep a request on one node, next to what it must include.
func TestPreferredFollowsPlacementRules(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, testNode{fixture: "xeon-2s-interleaved", config: "kubelet: {devicePlugin: true}\npools: {exclusive: {count: 8}}\n"}, statePath(f))
	p := rp.p
	devs := p.Devices()
	require.Len(t, devs, 8)
	byNode := map[int][]string{}
	var all []string
	for _, d := range devs {
		byNode[d.NUMA] = append(byNode[d.NUMA], d.ID)
		all = append(all, d.ID)
	}
	require.Len(t, byNode, 2, "fixture spans two NUMA nodes: %s", healthOf(devs))
	for node, ids := range byNode {
		got, err := p.Preferred(all, ids[:1], 2)
		require.NoError(t, err)
		require.Len(t, got, 2)
		for _, g := range got {
			assert.Contains(t, ids, g, "must-include on node %d keeps the rest on node %d", node, node)
		}
	}
	_, err := p.Preferred(all, nil, 9)
	require.Error(t, err)
	_, err = p.Preferred([]string{"999"}, nil, 1)
	require.ErrorContains(t, err, "not a CPU of the exclusive pool")
}

// TestKubeletReallocatesCPUsOfAnEndingPod: the kubelet frees a terminating
// pod's devices before its container has stopped. The new allocation is
// accepted, the new container waits (its creation fails and the kubelet
// retries) until the old pod let the CPU go, the CPU stays advertised
// healthy, and once the new pod runs on it the old pod's grant is dropped:
// its container cannot come back on the CPU the kubelet gave away.
func TestKubeletReallocatesCPUsOfAnEndingPod(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	oldEnv := grantEnv(t, p, "6")
	oldPod := f.runPod(podSpec{name: "old", namespace: "telco"})
	oldCtr, _, err := f.createWithEnv(oldPod, "app", 0, oldEnv)
	require.NoError(t, err)

	newEnv := grantEnv(t, p, "6")
	assert.Contains(t, healthOf(p.Devices()), " 6@0 ", "still the kubelet's to account for")
	newPod := f.runPod(podSpec{name: "new", namespace: "telco"})
	_, _, err = f.createWithEnv(newPod, "app", 0, newEnv)
	require.ErrorContains(t, err, "container ctr-old-app still holds it (its pod is ending; the kubelet retries the creation)")
	p.mu.Lock()
	assert.Len(t, p.grants.byToken, 2, "a failed creation binds nothing and drops nothing")
	p.mu.Unlock()

	f.stopContainer(oldCtr)
	_, _, err = f.createWithEnv(newPod, "app", 0, newEnv)
	require.ErrorContains(t, err, "still holds it", "held for the old pod until its sandbox stops")
	f.stopPod(oldPod) // stopped, not yet removed: its grant is not forgotten with it
	_, resp, err := f.createWithEnv(newPod, "app", 0, newEnv)
	require.NoError(t, err)
	assert.Equal(t, "6", resp.Adjust.Linux.Resources.Cpu.Cpus)
	_, _, err = f.createWithEnv(oldPod, "app", 0, oldEnv)
	require.ErrorContains(t, err, "unknown grant token", "the old container cannot come back on the CPUs the kubelet gave away")
	assert.Contains(t, healthOf(p.Devices()), " 6@0 ")
}

// TestInitAndAppContainersOfOnePod: the kubelet admits a pod by allocating
// for every container, init containers first, and the app container reuses
// the init container's devices, so both grants name the same CPUs. Both
// tokens stay valid for their pod, in either order, also when the pod's
// sandbox is re-created (a node reboot) and its init container runs again;
// no other pod can show either; the pod's removal forgets both.
func TestInitAndAppContainersOfOnePod(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	initEnv := grantEnv(t, p, "6", "14")
	appEnv := grantEnv(t, p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	initCtr, resp, err := f.createWithEnv(pod, "init", 0, initEnv)
	require.NoError(t, err, "the init container's token survives the app container's Allocate")
	assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	f.exitContainer(initCtr, 0)
	app, resp, err := f.createWithEnv(pod, "app", 0, appEnv)
	require.NoError(t, err)
	assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus, "the app container reuses the init container's CPUs")
	assert.Equal(t, "4@0 5@0 6@0 7@0 12@0 13@0 14@0 15@0", healthOf(p.Devices()))

	other := f.runPod(podSpec{name: "other", namespace: "telco"})
	for _, env := range []string{initEnv, appEnv} {
		_, _, err = f.createWithEnv(other, "init", 0, env)
		require.ErrorContains(t, err, "the grant belongs to container telco/dpdk/")
	}

	// A node reboot: the kubelet runs the pod in a new sandbox, its init
	// container first, with the tokens of its checkpoint.
	f.exitContainer(app, 137)
	f.removeContainer(app)
	f.removeContainer(initCtr)
	f.stopPod(pod)
	fresh := &api.PodSandbox{Id: "sb-dpdk-1", Name: pod.Name, Uid: pod.Uid, Namespace: pod.Namespace,
		Linux: &api.LinuxPodSandbox{CgroupParent: pod.Linux.CgroupParent, CgroupsPath: pod.Linux.CgroupParent + "/sb-dpdk-1"}}
	f.mkCgroup(fresh.Linux.CgroupsPath)
	f.mu.Lock()
	f.pods[fresh.Id] = fresh
	f.mu.Unlock()
	require.NoError(t, f.r.RunPodSandbox(t.Context(), &api.RunPodSandboxRequest{Pod: fresh}))
	f.removePod(pod)
	initCtr, resp, err = f.createWithEnv(fresh, "init", 0, initEnv)
	require.NoError(t, err, "the init container runs again in the new sandbox")
	assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	f.exitContainer(initCtr, 0)
	_, resp, err = f.createWithEnv(fresh, "app", 0, appEnv)
	require.NoError(t, err)
	assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)

	f.removePod(fresh)
	p.mu.Lock()
	assert.Empty(t, p.grants.byToken, "the pod's grants go with it")
	p.mu.Unlock()
}

// TestAppContainerBindsFirst: when the app container is the first to show
// its token (the daemon was down while the init container ran), the older
// grants for its CPUs that no container has shown become its pod's: the
// init container's, and an allocation that never became a container (a
// pod deleted before its containers started). No other pod can show them,
// the pod's own init container still can, and they go with the pod. A
// newer allocation for those CPUs, of a pod admitted once this one ended,
// is never taken.
func TestAppContainerBindsFirst(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	stale := grantEnv(t, p, "6", "14")
	initEnv := grantEnv(t, p, "6")
	appEnv := grantEnv(t, p, "6")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	app, _, err := f.createWithEnv(pod, "app", 0, appEnv)
	require.NoError(t, err)
	other := f.runPod(podSpec{name: "other", namespace: "telco"})
	_, _, err = f.createWithEnv(other, "init", 0, initEnv)
	require.ErrorContains(t, err, "the grant belongs to pod telco/dpdk")
	_, _, err = f.createWithEnv(other, "init", 0, stale)
	require.ErrorContains(t, err, "the grant belongs to pod telco/dpdk")
	f.exitContainer(app, 0)
	_, resp, err := f.createWithEnv(pod, "init", 0, initEnv)
	require.NoError(t, err)
	assert.Equal(t, "6", resp.Adjust.Linux.Resources.Cpu.Cpus)

	newer := grantEnv(t, p, "6") // the kubelet gave CPU 6 again: dpdk is ending
	f.stopPod(pod)               // and restarts nothing
	_, _, err = f.createWithEnv(pod, "app", 0, appEnv)
	require.NoError(t, err, "a binding made again settles nothing")
	p.mu.Lock()
	_, kept := p.grants.byToken[strings.TrimPrefix(newer, EnvGrant+"=")]
	p.mu.Unlock()
	assert.True(t, kept, "the newer allocation is not taken")
	f.removePod(pod)
	assert.Equal(t, []string{strings.TrimPrefix(newer, EnvGrant+"=")}, slices.Collect(maps.Keys(grantsInMemory(p))),
		"dpdk's grants, and the stale one, went with it")
	_, resp, err = f.createWithEnv(other, "app", 0, newer)
	require.NoError(t, err)
	assert.Equal(t, "6", resp.Adjust.Linux.Resources.Cpu.Cpus)
}

// TestUnboundGrantsAreBounded: allocations no container ever shows (pods
// deleted before their containers started) cannot grow without end; the
// oldest go first.
func TestUnboundGrantsAreBounded(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	limit := maxUnboundGrants(8)
	first := grantEnv(t, p, "4")
	for range limit {
		grantEnv(t, p, "5")
	}
	p.mu.Lock()
	assert.Len(t, p.grants.byToken, limit)
	_, kept := p.grants.byToken[strings.TrimPrefix(first, EnvGrant+"=")]
	p.mu.Unlock()
	assert.False(t, kept, "the oldest unbound grant went first")
	assert.Contains(t, rp.log.String(), "held by no running pod (never shown by a container, or their pod is gone); the oldest 1 (CPUs 4) forgotten")
}

// TestResourceRouteRefusesCPUResize: the kubelet accounts for a
// resource-route container's CPUs as devices; a CPU request resize must not
// grow or shrink them behind its back.
func TestResourceRouteRefusesCPUResize(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, rp.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	ctr, resp, err := f.createWithEnv(pod, "app", 2000, env)
	require.NoError(t, err)
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)

	_, err = f.updateContainer(pod, ctr, 4000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resize to 4000m refused: its CPUs 6,14 are the cpupool.dev/exclusive devices the kubelet allocated")
	assert.Equal(t, "6,14", f.cpus(ctr), "nothing changed")
	a, ok := rp.p.alloc.Get(ctr.GetId())
	require.True(t, ok)
	assert.Equal(t, int64(2000), a.MilliCPU)
}
