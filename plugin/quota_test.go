package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func quotaOf(r *api.LinuxResources) (int64, bool) {
	q := r.GetCpu().GetQuota()
	return q.GetValue(), q != nil
}

func TestCPUQuotaOfExclusiveContainers(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "pool.cpupool.dev/container.app": "infra",
		"disable-cpu-quota.cpupool.dev/container.throttled": "false"}})

	fwd, resp, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	q, set := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.True(t, set)
	assert.Equal(t, int64(-1), q, "no CFS quota on exclusive CPUs by default")

	_, resp, err = f.createContainer(pod, "app", 2000)
	require.NoError(t, err)
	_, set = quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.False(t, set, "infra containers keep the kubelet's quota")

	throttled, resp, err := f.createContainer(pod, "throttled", 2000)
	require.NoError(t, err)
	_, set = quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.False(t, set, "the annotation keeps the quota")

	// The kubelet sets the quota again with every update; it stays lifted,
	// on a resize too.
	up, err := f.updateContainer(pod, fwd, 2000)
	require.NoError(t, err)
	q, set = quotaOf(updateFor(up, fwd.Id).GetLinux().GetResources())
	assert.True(t, set)
	assert.Equal(t, int64(-1), q)
	up, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, fwd.Id).GetLinux().GetResources())
	assert.Equal(t, int64(-1), q, "a resize keeps the quota lifted")
	up, err = f.updateContainer(pod, throttled, 4000)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, throttled.Id).GetLinux().GetResources())
	assert.Equal(t, int64(400000), q, "the kubelet's quota for the new limit")

	// Remembered across a restart.
	rp.stop()
	startPlugin(t, f, xeon, statePath(f))
	up, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, fwd.Id).GetLinux().GetResources())
	assert.Equal(t, int64(-1), q)

	bad := f.runPod(podSpec{name: "bad", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "disable-cpu-quota.cpupool.dev": "maybe"}})
	_, _, err = f.createContainer(bad, "c", 1000)
	assert.ErrorContains(t, err, `annotation disable-cpu-quota.cpupool.dev="maybe": not a boolean; use true or false`)
}

func TestCPUQuotaKeptWhenConfigured(t *testing.T) {
	f := newFakeRuntime(t, false)
	node := xeon
	node.config += "allocation: {disableCPUQuota: false}\n"
	startPlugin(t, f, node, statePath(f))
	pod := f.runPod(podSpec{name: "p", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "disable-cpu-quota.cpupool.dev/container.lifted": "true"}})
	_, resp, err := f.createContainer(pod, "kept", 1000)
	require.NoError(t, err)
	_, set := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.False(t, set)
	_, resp, err = f.createContainer(pod, "lifted", 1000)
	require.NoError(t, err)
	q, _ := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.Equal(t, int64(-1), q)
}

// TestRunWarnsAboutASharedPoolOnDomainIsolatedCPUs: the xeon fixture's
// isolcpus= has the domain flag, and its config a shared pool of 8.
func TestRunWarnsAboutASharedPoolOnDomainIsolatedCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, xeon, statePath(f))
	assert.Contains(t, rp.log.String(), "config: warning: pools.shared: CPUs")
	assert.Contains(t, rp.log.String(), "taken out of the scheduler's load balancing")
}

// TestCPUQuotaLiftedForContainersAdoptedOnSynchronize: a container the
// state does not know (the state was lost) still gets its quota lifted.
func TestCPUQuotaLiftedForContainersAdoptedOnSynchronize(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	first.stop()
	require.NoError(t, os.Remove(statePath(f)))
	f.mu.Lock()
	fwd.Linux.Resources.Cpu.Quota = api.Int64(200000) // as the kubelet set it
	f.mu.Unlock()

	startPlugin(t, f, xeon, statePath(f))
	f.mu.Lock()
	defer f.mu.Unlock()
	var found bool
	for _, u := range f.syncUpdates {
		if u.GetContainerId() == fwd.Id {
			found = true
			q, _ := quotaOf(u.GetLinux().GetResources())
			assert.Equal(t, int64(-1), q)
			assert.Equal(t, fwd.Linux.Resources.Cpu.Cpus, u.GetLinux().GetResources().GetCpu().GetCpus(), "kept where it runs")
		}
	}
	assert.True(t, found, "Synchronize lifts the adopted container's quota")
}

// TestCPUQuotaLiftedForResourceRoute: a Guaranteed pod of the resource
// that requests cpu: 10m, as docs/kubernetes.md suggests, would be throttled to 1%
// of one CPU while it owns two. Its quota is lifted at creation, stays
// lifted on the kubelet's updates and across a restart, and is kept where
// the annotation keeps it: the same rule as for annotated containers and
// containers adopted at Synchronize.
func TestCPUQuotaLiftedForResourceRoute(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "guaranteed",
		annotations: map[string]string{"disable-cpu-quota.cpupool.dev/container.throttled": "false"}})
	app, resp, err := f.createWithEnv(pod, "app", 10, grantEnv(t, rp.p, "6", "14"))
	require.NoError(t, err)
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	q, set := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.True(t, set, "the resource route lifts the quota, as the annotation route does")
	assert.Equal(t, int64(-1), q)
	up, err := f.updateContainer(pod, app, 10)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, app.Id).GetLinux().GetResources())
	assert.Equal(t, int64(-1), q, "the kubelet's update does not bring the quota back")

	_, resp, err = f.createWithEnv(pod, "throttled", 10, grantEnv(t, rp.p, "7"))
	require.NoError(t, err)
	_, set = quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.False(t, set, "the annotation keeps the quota")

	rp.stop()
	startPlugin(t, f, desktopKubelet, statePath(f))
	up, err = f.updateContainer(pod, app, 10)
	require.NoError(t, err)
	q, _ = quotaOf(updateFor(up, app.Id).GetLinux().GetResources())
	assert.Equal(t, int64(-1), q, "remembered across a restart")
}

// TestCPUQuotaLiftedWhenSynchronizeRepins: a remembered exclusive container
// that the runtime created without the plugin's adjustment (a kill between
// the decision and the reply) runs unpinned with the kubelet's quota;
// Synchronize pins it again and lifts the quota in the same update, as for
// a container it adopts, and lifts the quota the kubelet gave back to a
// correctly pinned one while the plugin was down.
func TestCPUQuotaLiftedWhenSynchronizeRepins(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	unpinned, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	pinned, _, err := f.createContainer(pod, "rx", 1000)
	require.NoError(t, err)
	cpus := f.cpus(unpinned)
	first.stop()
	f.mu.Lock()
	unpinned.Linux.Resources.Cpu.Cpus = ""
	unpinned.Linux.Resources.Cpu.Quota = api.Int64(200000)
	pinned.Linux.Resources.Cpu.Quota = api.Int64(100000)
	f.mu.Unlock()

	startPlugin(t, f, xeon, statePath(f))
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, cpus, unpinned.Linux.Resources.Cpu.Cpus, "pinned again on its CPUs")
	assert.Equal(t, int64(-1), unpinned.Linux.Resources.Cpu.Quota.GetValue(), "and its quota lifted")
	assert.Equal(t, int64(-1), pinned.Linux.Resources.Cpu.Quota.GetValue())
}

// podQuota reads the CFS quota of a pod's cgroup once the plugin has done
// the sandbox rounds it was asked for: cpu.max on cgroup v2,
// cpu.cfs_quota_us on v1.
func (f *fakeRuntime) podQuota(pod *api.PodSandbox) string {
	f.t.Helper()
	f.settleSandboxes()
	dir, err := podCgroupDir(pod.Linux.CgroupParent)
	require.NoError(f.t, err)
	file := filepath.Join(f.cgroupRoot, "cpu", dir, "cpu.cfs_quota_us")
	if f.hierarchy() == f.cgroupRoot {
		file = filepath.Join(f.cgroupRoot, dir, "cpu.max")
	}
	b, err := os.ReadFile(file)
	require.NoError(f.t, err)
	return strings.TrimSpace(string(b))
}

// setPodQuota writes a pod cgroup's quota as the kubelet does (cpu.max).
func (f *fakeRuntime) setPodQuota(pod *api.PodSandbox, cpuMax string) {
	f.t.Helper()
	dir, err := podCgroupDir(pod.Linux.CgroupParent)
	require.NoError(f.t, err)
	file, value := filepath.Join(f.cgroupRoot, dir, "cpu.max"), cpuMax
	if f.hierarchy() != f.cgroupRoot {
		file, value = filepath.Join(f.cgroupRoot, "cpu", dir, "cpu.cfs_quota_us"), strings.Fields(cpuMax)[0]
	}
	require.NoError(f.t, os.WriteFile(file, []byte(value+"\n"), 0o644))
}

// podQuotas are what a pod cgroup's quota file says with the kubelet's
// quota and once lifted, on the fake runtime's cgroup version.
func (f *fakeRuntime) podQuotas() (kubelet, lifted string) {
	if f.hierarchy() == f.cgroupRoot {
		return kubeletPodQuota, "max 100000"
	}
	return strings.Fields(kubeletPodQuota)[0], "-1"
}

// TestPodCPUQuotaLiftedWithExclusiveContainers: the kubelet's quota on the
// pod cgroup (the sum of the pod's limits) would throttle the CPUs the
// container owns whatever the container's own cgroup says, so a pod with
// a container whose quota is lifted gets its pod cgroup's lifted too, on
// cgroup v1 and v2, cgroupfs and systemd. A pod of infra containers keeps
// the kubelet's.
func TestPodCPUQuotaLiftedWithExclusiveContainers(t *testing.T) {
	for _, tc := range []struct {
		name             string
		unified, systemd bool
	}{{"v1", false, false}, {"v2", true, false}, {"v1-systemd", false, true}, {"v2-systemd", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRuntime(t, tc.unified)
			rp := startPlugin(t, f, xeon, statePath(f))
			kubelet, lifted := f.podQuotas()
			dpdk := f.runPod(podSpec{name: "dpdk", systemd: tc.systemd, annotations: map[string]string{
				"pool.cpupool.dev": "exclusive", "pool.cpupool.dev/container.app": "infra"}})
			web := f.runPod(podSpec{name: "web", systemd: tc.systemd})
			assert.Equal(t, kubelet, f.podQuota(dpdk), "the kubelet's quota until an exclusive container comes")

			_, _, err := f.createContainer(dpdk, "app", 100)
			require.NoError(t, err)
			assert.Equal(t, kubelet, f.podQuota(dpdk), "an infra container keeps the pod's quota")
			_, _, err = f.createContainer(dpdk, "fwd", 2000)
			require.NoError(t, err)
			_, _, err = f.createContainer(web, "app", 100)
			require.NoError(t, err)
			assert.Equal(t, lifted, f.podQuota(dpdk), "the pod of an exclusive container has no quota")
			assert.Equal(t, kubelet, f.podQuota(web), "an infra pod keeps the kubelet's quota")
			log := rp.log.String()
			assert.Contains(t, log, "pod default/dpdk: CFS quota", "logged, with what it was")
			assert.Equal(t, 1, strings.Count(log, "of its pod cgroup lifted"), "once: a lifted quota is not written again")
		})
	}
}

// TestPodCPUQuotaLiftedForResourceRoute: a pod of cpupool.dev/exclusive
// with the token cpu: 10m that docs/kubernetes.md suggests gets 1000 of
// 100000 on its pod cgroup from the kubelet: 1% of one CPU for the CPUs
// it owns. Its pod quota is lifted with its container's; a pod whose
// container keeps its quota (the annotation) keeps the pod's.
func TestPodCPUQuotaLiftedForResourceRoute(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "guaranteed"})
	kept := f.runPod(podSpec{name: "kept", namespace: "telco", qos: "guaranteed",
		annotations: map[string]string{"disable-cpu-quota.cpupool.dev": "false"}})
	_, resp, err := f.createWithEnv(pod, "app", 10, grantEnv(t, rp.p, "6", "14"))
	require.NoError(t, err)
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	_, _, err = f.createWithEnv(kept, "app", 10, grantEnv(t, rp.p, "7"))
	require.NoError(t, err)
	assert.Equal(t, "max 100000", f.podQuota(pod), "the kubelet's period stays")
	assert.Equal(t, kubeletPodQuota, f.podQuota(kept))
}

// TestPodCPUQuotaKeptWhenConfigured: with disableCPUQuota: false the
// containers keep their quota, and so does their pod; a container lifted
// by the annotation lifts its pod's.
func TestPodCPUQuotaKeptWhenConfigured(t *testing.T) {
	f := newFakeRuntime(t, true)
	node := xeon
	node.config += "allocation: {disableCPUQuota: false}\n"
	startPlugin(t, f, node, statePath(f))
	kept := f.runPod(podSpec{name: "kept", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	lifted := f.runPod(podSpec{name: "lifted", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "disable-cpu-quota.cpupool.dev": "true"}})
	_, _, err := f.createContainer(kept, "c", 1000)
	require.NoError(t, err)
	_, _, err = f.createContainer(lifted, "c", 1000)
	require.NoError(t, err)
	assert.Equal(t, kubeletPodQuota, f.podQuota(kept))
	assert.Equal(t, "max 100000", f.podQuota(lifted))
}

// TestPodCPUQuotaLiftedAgain: the kubelet writes the pod quota again when
// it resizes any of the pod's containers in place (SetPodCgroupConfig),
// before the container's update; the update has it lifted again. A
// Synchronize lifts the quota the kubelet gave back while the plugin was
// away.
func TestPodCPUQuotaLiftedAgain(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "pool.cpupool.dev/container.app": "infra"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	app, _, err := f.createContainer(pod, "app", 500)
	require.NoError(t, err)
	require.Equal(t, "max 100000", f.podQuota(pod))

	f.setPodQuota(pod, "450000 100000") // the limits after the resize: 4 + 0.5
	_, err = f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	assert.Equal(t, "max 100000", f.podQuota(pod), "lifted again after the exclusive container's resize")

	f.setPodQuota(pod, "500000 100000")
	_, err = f.updateContainer(pod, app, 1000)
	require.NoError(t, err)
	assert.Equal(t, "max 100000", f.podQuota(pod), "and after its infra container's")

	rp.stop()
	f.setPodQuota(pod, "500000 100000")
	startPlugin(t, f, xeon, statePath(f))
	assert.Equal(t, "max 100000", f.podQuota(pod), "Synchronize lifts it")
}

// TestPodCPUQuotaWithoutPodCgroup: a runtime without pod cgroups, or a pod
// cgroup without the cpu controller, leaves nothing to lift: the container
// is created with its own quota lifted, the plugin says so once at debug,
// and warns of nothing.
func TestPodCPUQuotaWithoutPodCgroup(t *testing.T) {
	for _, unified := range []bool{false, true} {
		t.Run(map[bool]string{false: "v1", true: "v2"}[unified], func(t *testing.T) {
			f := newFakeRuntime(t, unified)
			rp := startPluginWith(t, f, xeon, statePath(f), func(rp *runningPlugin) { rp.p.log.SetLevel(logrus.DebugLevel) })
			ann := map[string]string{"pool.cpupool.dev": "exclusive"}
			none := f.runPod(podSpec{name: "none", noPodCgroup: true, annotations: ann})
			nocpu := f.runPod(podSpec{name: "nocpu", noCPUController: true, annotations: ann})
			for _, pod := range []*api.PodSandbox{none, nocpu} {
				_, resp, err := f.createContainer(pod, "c", 1000)
				require.NoError(t, err)
				q, _ := quotaOf(resp.GetAdjust().GetLinux().GetResources())
				assert.Equal(t, int64(-1), q)
			}
			f.runPod(podSpec{name: "later"}) // another round
			c, _, err := f.createContainer(none, "d", 1000)
			require.NoError(t, err)
			f.stopContainer(c)
			rp.p.waitSandboxesPinned()
			log := rp.log.String()
			assert.Equal(t, 1, strings.Count(log, "pod default/none: no CFS quota of its pod cgroup"), log)
			assert.Equal(t, 1, strings.Count(log, "pod default/nocpu: no CFS quota of its pod cgroup"), log)
			assert.NotContains(t, log, "lifting the CFS quota")
			assert.NotContains(t, log, "level=error")
		})
	}
}

// TestLiftQuotaLayouts: the pod cgroup is found from the cgroup parent the
// runtime reports, for both drivers and both hierarchies (v1's cpu
// controller mounted as cpu or as cpu,cpuacct), and what cannot be lifted
// says why.
func TestLiftQuotaLayouts(t *testing.T) {
	write := func(t *testing.T, path, data string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	}
	read := func(t *testing.T, path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(b)
	}
	t.Run("v2", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu\n")
		slice := filepath.Join(root, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cpu.max")
		write(t, slice, "1000 50000\n")
		c := newCgroupPinner(root)
		file, was, err := c.LiftQuota("kubepods-burstable-pod1.slice")
		require.NoError(t, err)
		assert.Equal(t, slice, file)
		assert.Equal(t, "1000 50000", was)
		assert.Equal(t, "max 50000", read(t, slice), "the kubelet's period is kept")
		_, was, err = c.LiftQuota("kubepods-burstable-pod1.slice")
		assert.NoError(t, err)
		assert.Empty(t, was, "lifted already: nothing written")

		write(t, filepath.Join(root, "kp/pod2/cpu.max"), "max 100000\n")
		_, was, err = c.LiftQuota("/kp/pod2")
		assert.NoError(t, err)
		assert.Empty(t, was)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "kp/pod3"), 0o755))
		_, _, err = c.LiftQuota("/kp/pod3")
		assert.ErrorIs(t, err, errNoCPUController)
		_, _, err = c.LiftQuota("/kp/gone")
		assert.ErrorIs(t, err, errNoPodCgroup)
		for _, parent := range []string{"", "/", "-.slice"} {
			_, _, err = c.LiftQuota(parent)
			assert.ErrorIs(t, err, errNoPodCgroup, "%q: the root is never a pod's cgroup", parent)
		}
		_, _, err = c.LiftQuota("kube--pods.slice")
		assert.ErrorContains(t, err, "invalid systemd slice")
		require.NoError(t, os.Mkdir(filepath.Join(root, "kp/pod4"), 0o755))
		require.NoError(t, os.Mkdir(filepath.Join(root, "kp/pod4/cpu.max"), 0o755))
		_, _, err = c.LiftQuota("/kp/pod4")
		assert.ErrorContains(t, err, "reading CFS quota: ")
	})
	t.Run("v1", func(t *testing.T) {
		for _, ctl := range []string{"cpu", "cpu,cpuacct"} {
			root := t.TempDir()
			quota := filepath.Join(root, ctl, "kubepods/pod1/cpu.cfs_quota_us")
			write(t, quota, "1000\n")
			c := newCgroupPinner(root)
			file, was, err := c.LiftQuota("/kubepods/pod1")
			require.NoError(t, err, ctl)
			assert.Equal(t, quota, file)
			assert.Equal(t, "1000", was)
			assert.Equal(t, "-1", read(t, quota))
			_, was, err = c.LiftQuota("/kubepods/pod1")
			assert.NoError(t, err)
			assert.Empty(t, was)
			_, _, err = c.LiftQuota("/kubepods/pod2")
			assert.ErrorIs(t, err, errNoPodCgroup)
		}
		_, _, err := newCgroupPinner(t.TempDir()).LiftQuota("/kubepods/pod1")
		assert.ErrorIs(t, err, errNoCPUController, "no cpu hierarchy mounted")
	})
}

// TestPodCPUQuotaFailureIsLogged: a pod quota that cannot be lifted is
// logged as a sandbox that cannot be pinned is, and fails nothing.
func TestPodCPUQuotaFailureIsLogged(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	dir, err := podCgroupDir(pod.Linux.CgroupParent)
	require.NoError(t, err)
	cpuMax := filepath.Join(f.cgroupRoot, dir, "cpu.max")
	require.NoError(t, os.Remove(cpuMax))
	require.NoError(t, os.Mkdir(cpuMax, 0o755)) // cannot be read
	_, _, err = f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	rp.p.waitSandboxesPinned()
	assert.Contains(t, rp.log.String(), `level=warning msg="pod default/dpdk: lifting the CFS quota of its pod cgroup`)
}
