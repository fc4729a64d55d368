package plugin

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// desktop is the 8-core/16-thread fixture with every pool configured:
// exclusive 4-7,12-15, shared 2-3,10-11, infra 0-1,8-9 (0,8 reserved, so
// 1,9 can be lent to exclusive-non-isolcpus containers).
var desktop = testNode{fixture: "desktop-8c16t", config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`}

func statePath(f *fakeRuntime) string { return filepath.Join(f.dir, "state", "state.json") }

func TestContainersOfEveryPool(t *testing.T) {
	for _, unified := range []bool{false, true} {
		name := map[bool]string{false: "cgroup v1", true: "cgroup v2"}[unified]
		t.Run(name, func(t *testing.T) {
			f := newFakeRuntime(t, unified)
			rp := startPlugin(t, f, desktop, statePath(f))

			pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
				"pool.cpupool.dev/container.fwd": "exclusive", "pool.cpupool.dev/container.eni": "exclusive-non-isolcpus", "pool.cpupool.dev/pod": "shared"}})
			assert.Equal(t, "0-1,8-9", f.sandboxCPUs(pod), "pause container pinned to infra")

			fwd, resp, err := f.createContainer(pod, "fwd", 2000)
			require.NoError(t, err)
			assert.Equal(t, "4,12", f.cpus(fwd))
			assert.Equal(t, "0", resp.Adjust.Linux.Resources.Cpu.Mems)
			assert.Equal(t, map[string]string{EnvCPUs: "4,12", EnvMems: "0", EnvPool: "exclusive"}, envOf(resp))
			assert.Equal(t, uint64(2048), fwd.Linux.Resources.Cpu.Shares.GetValue(), "CPU shares stay as the kubelet set them")

			logger, _, err := f.createContainer(pod, "logger", 100)
			require.NoError(t, err)
			assert.Equal(t, "2-3,10-11", f.cpus(logger), "pod-level annotation: shared")

			web := f.runPod(podSpec{name: "web", qos: "burstable"})
			app, _, err := f.createContainer(web, "app", 500)
			require.NoError(t, err)
			assert.Equal(t, "0-1,8-9", f.cpus(app), "no annotation: infra")

			eni, resp, err := f.createContainer(pod, "eni", 1000)
			require.NoError(t, err)
			assert.Equal(t, "1", f.cpus(eni), "lent from infra, never a reserved CPU")
			require.Len(t, resp.Update, 1, "infra members follow")
			assert.Equal(t, app.Id, resp.Update[0].ContainerId)
			assert.Equal(t, "0,8-9", f.cpus(app))
			assert.Equal(t, "0,8-9", f.sandboxCPUs(pod), "sandboxes follow infra")
			assert.Equal(t, "0,8-9", f.sandboxCPUs(web))

			updates := f.stopContainer(eni)
			assert.Empty(t, updates, "a stopped container's CPU stays held for its pod: infra does not change")
			assert.Equal(t, "0,8-9", f.cpus(app))
			f.removeContainer(eni)

			st := rp.savedState(t)
			assert.Len(t, st.Containers, 3)
			assert.Equal(t, "4,12", st.Containers[fwd.Id].CPUs)
			assert.Equal(t, "telco", st.Containers[fwd.Id].PodNamespace)
			require.Contains(t, st.Held, "uid-dpdk/eni")
			assert.Equal(t, "1", st.Held["uid-dpdk/eni"].CPUs)
			assert.Equal(t, eni.Id, st.Held["uid-dpdk/eni"].ContainerID)

			f.removePod(pod)
			assert.Equal(t, "0-1,8-9", f.sandboxCPUs(web), "pause containers follow at once")
			_, _, err = f.createContainer(web, "next", 100)
			require.NoError(t, err)
			assert.Equal(t, "0-1,8-9", f.cpus(app), "infra grows back with the next reply after the pod goes")
			st = rp.savedState(t)
			assert.Len(t, st.Containers, 2, "web/app and web/next")
			assert.Empty(t, st.Held)
			info, err := os.Stat(statePath(f))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
		})
	}
}

func TestSystemdCgroupSandbox(t *testing.T) {
	f := newFakeRuntime(t, true)
	startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "sd", systemd: true})
	assert.Equal(t, "0-1,8-9", f.sandboxCPUs(pod))
	dir, _ := cgroupDir(pod.Linux.CgroupsPath)
	assert.Equal(t, "/kubepods.slice/kubepods-poduid_sd.slice/cri-containerd-sb-sd.scope", dir)
}

func TestSandboxWithoutCgroupIsFine(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, desktop, statePath(f))
	// CRI-O with drop_infra_ctr: no infra container, no cgroup of its own.
	pod := &api.PodSandbox{Id: "sb-noinfra", Name: "noinfra", Uid: "uid-noinfra", Namespace: "default",
		Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/poduid-noinfra", CgroupsPath: "/kubepods/poduid-noinfra/sb-noinfra"}}
	f.mu.Lock()
	f.pods[pod.Id] = pod
	f.mu.Unlock()
	require.NoError(t, f.r.RunPodSandbox(t.Context(), &api.RunPodSandboxRequest{Pod: pod}))
	_, _, err := f.createContainer(pod, "app", 0)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(f.hierarchy(), "kubepods/poduid-noinfra/sb-noinfra"))
	assert.True(t, os.IsNotExist(err), "no cgroup is created for a sandbox")
}

func TestUpdateContainerKeepsPinnedCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "p", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	resp, err := f.r.UpdateContainer(t.Context(), &api.UpdateContainerRequest{Pod: pod, Container: ctr,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-15", Shares: api.UInt64(2048)}}})
	require.NoError(t, err)
	require.Len(t, resp.Update, 1)
	assert.Equal(t, ctr.Id, resp.Update[0].ContainerId)
	assert.Equal(t, "4,12", resp.Update[0].Linux.Resources.Cpu.Cpus, "the plugin's cpuset wins")

	// The same CPU request without a cpuset (a memory resize, say) passes.
	resp, err = f.r.UpdateContainer(t.Context(), &api.UpdateContainerRequest{Pod: pod, Container: ctr,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2048)}, Memory: &api.LinuxMemory{Limit: api.Int64(1 << 30)}}})
	require.NoError(t, err)
	for _, u := range resp.Update {
		assert.Empty(t, u.GetLinux().GetResources().GetCpu().GetCpus(), "updates without a cpuset pass")
	}
}

func TestBadAnnotationsFailCreation(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	tests := []struct {
		ns   string
		ann  map[string]string
		mcpu int64
		want string
	}{
		{"telco", map[string]string{"pool.cpupool.dev": "turbo"}, 1000, `annotation pool.cpupool.dev="turbo": unknown pool`},
		{"web", map[string]string{"pool.cpupool.dev": "exclusive"}, 1000, `namespace "web" may not use pool exclusive`},
		{"telco", map[string]string{"pool.cpupool.dev": "exclusive"}, 0, "requests no CPU"},
		{"telco", map[string]string{"pool.cpupool.dev/containr.c": "shared"}, 1000, `unknown scope "containr.c"`},
		{"telco", map[string]string{"pol.cpupool.dev": "shared"}, 1000, "unknown annotation"},
		{"telco", map[string]string{"pool.cpupool.dev": "exclusive", "hide-hyperthreads.cpupool.dev": "maybe"}, 1000, "not a boolean"},
		{"telco", map[string]string{"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": "x"}, 1000, "not a NUMA node list"},
		{"telco", map[string]string{"pool.cpupool.dev": "exclusive", "device.cpupool.dev": "/sys/class/net/none"}, 1000, "/sys/class/net/none"},
		{"telco", map[string]string{"pool.cpupool.dev": "exclusive"}, 9000, "pool exclusive cannot fit"},
	}
	for i, tc := range tests {
		pod := f.runPod(podSpec{name: "bad" + id(i), namespace: tc.ns, annotations: tc.ann})
		_, _, err := f.createContainer(pod, "c", tc.mcpu)
		require.Error(t, err, "%v", tc.ann)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), "nri-cpupool")
	}
	assert.Empty(t, rp.savedState(t).Containers, "refused containers leave no trace")
}

func TestPoolFullNothingElseChanges(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "big", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	big, _, err := f.createContainer(pod, "c", 6000)
	require.NoError(t, err)
	other := f.runPod(podSpec{name: "more", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err = f.createContainer(other, "c", 4000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "asks for 4 CPUs, but only 2 of the pool's 8 CPUs are free")
	assert.Equal(t, 6, mustParse(f.cpus(big)).Size())
	// The log names the container once, at error: the pool is the
	// operator's to act on (review 59b, L1).
	assert.Contains(t, rp.log.String(), `level=error msg="refused: pool exclusive cannot fit container telco/more/c: it asks for 4 CPUs`)
	assert.NotContains(t, rp.log.String(), "refusing container telco/more/c")

	// A bad annotation is the pod's own input: a warning, not an error.
	bad := f.runPod(podSpec{name: "bad", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exlusive"}})
	_, _, err = f.createContainer(bad, "c", 1000)
	require.Error(t, err)
	assert.Contains(t, rp.log.String(), `level=warning msg="refusing container telco/bad/c: annotation pool.cpupool.dev=`)
	assert.NotContains(t, rp.log.String(), `level=error msg="refusing container telco/bad/c`)
}

func TestConcurrentCreatesNeverOverlap(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, testNode{fixture: "epyc-1s-nps4", config: `isolatedCPUs: "4-63,68-127"`}, statePath(f))
	var pods []*api.PodSandbox
	for i := 0; i < 24; i++ {
		pods = append(pods, f.runPod(podSpec{name: "p" + id(i), annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}))
	}
	var wg sync.WaitGroup
	results := make([]*api.Container, len(pods))
	errs := make([]error, len(pods))
	for i, pod := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _, errs[i] = f.createContainer(pod, "c", int64(1000*(1+i%5)))
		}()
	}
	wg.Wait()
	seen := cpuset.New()
	for i, c := range results {
		require.NoError(t, errs[i])
		cpus := mustParse(f.cpus(c))
		assert.Equal(t, 1+i%5, cpus.Size())
		assert.True(t, seen.Intersection(cpus).IsEmpty(), "CPUs %s given twice", seen.Intersection(cpus))
		seen = seen.Union(cpus)
	}
}

func TestRestartedContainerGetsItsCPUsBack(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, desktop, statePath(f))
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for _, name := range []string{"a", "b", "c"} {
		pod := f.runPod(podSpec{name: name, namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
		ctr, _, err := f.createContainer(pod, "c", 2000)
		require.NoError(t, err)
		pods, ctrs = append(pods, pod), append(ctrs, ctr)
	}
	require.Equal(t, "5,13", f.cpus(ctrs[1]))
	// a and b stop; a fresh placement would now take a's lower CPUs 4,12.
	f.stopContainer(ctrs[0])
	f.stopContainer(ctrs[1])

	// The kubelet restarts b's container with a new id and the same name.
	restarted := &api.Container{Id: "ctr-b-c-restarted", PodSandboxId: pods[1].Id, Name: "c", State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2048)}}}}
	resp, err := f.r.CreateContainer(t.Context(), &api.CreateContainerRequest{Pod: pods[1], Container: restarted})
	require.NoError(t, err)
	assert.Equal(t, "5,13", resp.Adjust.Linux.Resources.Cpu.Cpus, "its previous CPUs, not the lowest free ones")
}

// TestDevicesFromTheRuntimeSteerPlacement: NRI lists the container's
// devices; a VFIO group or a DRM node on NUMA node 1 pulls its exclusive
// CPUs there, without any annotation.
func TestDevicesFromTheRuntimeSteerPlacement(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, testNode{fixture: "xeon-2s-interleaved", config: ""}, statePath(f))
	for _, tc := range []struct {
		name   string
		device *api.LinuxDevice
		node   string
	}{
		{"vfio", &api.LinuxDevice{Path: "/dev/vfio/42", Type: "c", Major: 244, Minor: 0}, "1"},
		{"gpu", &api.LinuxDevice{Path: "/dev/dri/renderD128", Type: "c", Major: 226, Minor: 128}, "0"},
	} {
		pod := f.runPod(podSpec{name: tc.name, annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
		ctr := &api.Container{Id: "ctr-" + tc.name, PodSandboxId: pod.Id, Name: "c",
			Linux: &api.LinuxContainer{
				Devices:   []*api.LinuxDevice{{Path: "/dev/null", Type: "c", Major: 1, Minor: 3}, tc.device},
				Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(4096)}}}}
		resp, err := f.r.CreateContainer(t.Context(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
		require.NoError(t, err)
		assert.Equal(t, tc.node, resp.Adjust.Linux.Resources.Cpu.Mems, "%s: CPUs %s", tc.name, resp.Adjust.Linux.Resources.Cpu.Cpus)
	}
}

// TestRemovalWithoutStopStillUpdatesFollowers: StopPodSandbox and
// RemovePodSandbox cannot return updates; the infra members' updates ride on
// the next reply (see TestRemovalUpdatesNeverCarryStalePools for why never
// on their own), and the pause containers follow at once.
func TestRemovalWithoutStopStillUpdatesFollowers(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, desktop, statePath(f), func(p *Plugin) { p.assumeNRIVersion = "v0.12.3" })
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	app, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	eni, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "0,8-9", f.cpus(app))

	f.removeContainer(eni) // no StopContainer first
	assert.Equal(t, "0,8-9", f.cpus(app), "a removed container's CPU stays held while its pod lives")
	require.NoError(t, f.r.StopPodSandbox(t.Context(), &api.StopPodSandboxRequest{Pod: pod}))
	assert.Equal(t, "0-1,8-9", f.sandboxCPUs(web), "pause containers follow at once")
	assert.Equal(t, "0,8-9", f.cpus(app), "a subset of infra until the next reply")
	_, resp, err := f.createContainer(web, "next", 100)
	require.NoError(t, err)
	assert.Equal(t, "0-1,8-9", f.cpus(app), "the next reply carries the update")
	assert.NotEmpty(t, resp.GetUpdate())

	// Same through RemovePodSandbox.
	pod2 := f.runPod(podSpec{name: "eni2", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	_, _, err = f.createContainer(pod2, "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "0,8-9", f.cpus(app))
	require.NoError(t, f.r.RemovePodSandbox(t.Context(), &api.RemovePodSandboxRequest{Pod: pod2}))
	assert.Equal(t, "0,8-9", f.cpus(app))
	_, _, err = f.createContainer(web, "after", 100)
	require.NoError(t, err)
	assert.Equal(t, "0-1,8-9", f.cpus(app))
}
