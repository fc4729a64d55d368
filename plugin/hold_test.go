package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// vm2 is the 2-CPU machine the project runs on: CPU 1 is the one exclusive
// CPU, CPU 0 is infra.
var vm2 = testNode{fixture: "vm-2cpu", config: `
isolatedCPUs: "1"
pools:
  exclusive: {cpus: "1"}
`}

func exclusivePod(f *fakeRuntime, name string) *api.PodSandbox {
	return f.runPod(podSpec{name: name, annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
}

// TestInitContainerThenAppContainerOnTwoCPUs: an exclusive init container
// runs to completion, then the pod's exclusive app container asks for the
// one exclusive CPU: both run, as under the kubelet's static policy, and no
// other pod gets the CPU in between.
func TestInitContainerThenAppContainerOnTwoCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, vm2, statePath(f))
	pod := exclusivePod(f, "job")
	init, _, err := f.createContainer(pod, "init", 1000)
	require.NoError(t, err)
	require.Equal(t, "1", f.cpus(init))
	f.exitContainer(init, 0)

	other := exclusivePod(f, "other")
	_, _, err = f.createContainer(other, "c", 1000)
	assert.ErrorContains(t, err, "pool exclusive cannot fit", "the pod's CPU is not up for grabs between its containers")

	app, _, err := f.createContainer(pod, "app", 1000)
	require.NoError(t, err, "the app container reuses the init container's CPU")
	assert.Equal(t, "1", f.cpus(app))
	st := rp.savedState(t)
	assert.Empty(t, st.Held, "nothing is held twice")
	assert.Equal(t, "1", st.Containers[app.Id].CPUs)
	f.removeContainer(init) // the kubelet prunes completed init containers; nothing changes
	assert.Equal(t, "1", f.cpus(app))
}

// TestCrashLoopKeepsTheCPU: a container that keeps failing is re-created by
// the kubelet (same pod, same name, attempt+1) after a back-off; another pod
// asking for the CPU meanwhile is refused, and every attempt gets the CPU.
// The holds survive a restart of the plugin; the pod's removal releases
// them.
func TestCrashLoopKeepsTheCPU(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, vm2, statePath(f))
	pod := exclusivePod(f, "crash")
	ctr, _, err := f.createContainer(pod, "app", 1000)
	require.NoError(t, err)
	greedy := exclusivePod(f, "greedy")
	for attempt := 1; attempt <= 3; attempt++ {
		updates := f.exitContainer(ctr, 1)
		assert.Empty(t, updates)
		_, _, err = f.createContainer(greedy, "c", 1000)
		require.ErrorContains(t, err, "pool exclusive cannot fit container default/greedy/c", "attempt %d: another pod during the back-off", attempt)
		if attempt == 2 {
			first.stop()
			first = startPlugin(t, f, vm2, statePath(f))
			_, _, err = f.createContainer(greedy, "c", 1000)
			require.ErrorContains(t, err, "cannot fit", "the hold survives a plugin restart")
			assert.Contains(t, first.log.String(), "1 CPU sets held for stopped containers")
		}
		f.removeContainer(ctr) // the kubelet's garbage collection of dead attempts changes nothing
		ctr, _, err = f.createAttempt(pod, "app", attempt, 1000)
		require.NoError(t, err, "attempt %d", attempt)
		assert.Equal(t, "1", f.cpus(ctr), "attempt %d gets its CPU", attempt)
	}

	f.exitContainer(ctr, 0) // even a clean exit keeps the CPU while the pod lives
	st := first.savedState(t)
	require.Contains(t, st.Held, "uid-crash/app")
	assert.Equal(t, int32(0), *st.Held["uid-crash/app"].ExitCode)
	f.removePod(pod)
	st = first.savedState(t)
	assert.Empty(t, st.Held, "the pod's removal releases the CPU")
	c, _, err := f.createContainer(greedy, "c", 1000)
	require.NoError(t, err)
	assert.Equal(t, "1", f.cpus(c))
}

// TestPodStopReleasesHeldCPUs: a finished pod (restartPolicy Never: the
// kubelet stops its sandbox) gives its CPUs back at StopPodSandbox, before
// it is removed; a pod removed without a stop does at RemovePodSandbox.
func TestPodStopReleasesHeldCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, desktop, statePath(f))
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	app, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	job := f.runPod(podSpec{name: "job", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev/container.fwd": "exclusive", "pool.cpupool.dev/container.eni": "exclusive-non-isolcpus"}})
	fwd, _, err := f.createContainer(job, "fwd", 8000)
	require.NoError(t, err)
	eni, _, err := f.createContainer(job, "eni", 1000)
	require.NoError(t, err)
	require.Equal(t, "0,8-9", f.cpus(app))
	f.exitContainer(fwd, 0)
	f.exitContainer(eni, 0)
	assert.Equal(t, "0,8-9", f.cpus(app), "a held exclusive-non-isolcpus CPU keeps infra shrunk")

	other := f.runPod(podSpec{name: "other", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err = f.createContainer(other, "c", 1000)
	require.ErrorContains(t, err, "cannot fit")

	f.stopPod(job)
	assert.Equal(t, "0-1,8-9", f.sandboxCPUs(web), "pause containers follow at the sandbox's stop")
	c, _, err := f.createContainer(other, "c", 8000)
	require.NoError(t, err, "every exclusive CPU is free at the sandbox's stop")
	assert.Equal(t, "4-7,12-15", f.cpus(c))
	assert.Equal(t, "0-1,8-9", f.cpus(app), "infra members follow with the next reply")

	// Removal without a stop (a runtime that skips it) releases as well.
	f.exitContainer(c, 1)
	require.NoError(t, f.r.RemovePodSandbox(t.Context(), &api.RemovePodSandboxRequest{Pod: other}))
	third := f.runPod(podSpec{name: "third", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err = f.createContainer(third, "c", 8000)
	assert.NoError(t, err)
}

// TestFailedContainerIsNotADonor: a sibling created while a container of
// the pod is failing does not take its CPU.
func TestFailedContainerIsNotADonor(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, vm2, statePath(f))
	pod := exclusivePod(f, "pair")
	a, _, err := f.createContainer(pod, "a", 1000)
	require.NoError(t, err)
	f.exitContainer(a, 2)
	_, _, err = f.createContainer(pod, "b", 1000)
	assert.ErrorContains(t, err, "cannot fit", "a failing container's CPU is kept for its own restart, not given to its sibling")
	again, _, err := f.createAttempt(pod, "a", 1, 1000)
	require.NoError(t, err)
	assert.Equal(t, "1", f.cpus(again))
}

// TestOldSandboxOfARecreatedPod: when the kubelet re-creates a pod's
// sandbox, it stops the old one first (the CPUs are released then, and
// placed again for the new run) and removes it later, while the pod runs
// in the new sandbox: that removal must not release the running pod.
func TestOldSandboxOfARecreatedPod(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, vm2, statePath(f))
	old := exclusivePod(f, "phoenix")
	c, _, err := f.createContainer(old, "app", 1000)
	require.NoError(t, err)
	f.exitContainer(c, 137)
	f.stopPod(old)

	fresh := &api.PodSandbox{Id: "sb-phoenix-1", Name: old.Name, Uid: old.Uid, Namespace: old.Namespace, Annotations: old.Annotations,
		Linux: &api.LinuxPodSandbox{CgroupParent: old.Linux.CgroupParent, CgroupsPath: old.Linux.CgroupParent + "/sb-phoenix-1"}}
	f.mkCgroup(fresh.Linux.CgroupsPath)
	f.mu.Lock()
	f.pods[fresh.Id] = fresh
	f.mu.Unlock()
	require.NoError(t, f.r.RunPodSandbox(t.Context(), &api.RunPodSandboxRequest{Pod: fresh}))
	again, _, err := f.createAttempt(fresh, "app", 1, 1000)
	require.NoError(t, err)
	require.Equal(t, "1", f.cpus(again))

	f.removePod(old) // the kubelet's garbage collection of the old sandbox
	other := exclusivePod(f, "other")
	_, _, err = f.createContainer(other, "c", 1000)
	assert.ErrorContains(t, err, "cannot fit", "the pod still runs in its new sandbox")
	st := rp.savedState(t)
	assert.Contains(t, st.Containers, again.Id)
}

// TestSandboxGoneWithoutAStop: containerd sends no StopPodSandbox for pods
// created before its own restart. A pod whose sandbox cgroup is gone and
// that runs nothing gives its held CPUs back when another pod would be
// refused; one whose sandbox lives keeps them.
func TestSandboxGoneWithoutAStop(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, vm2, statePath(f))
	pod := exclusivePod(f, "silent")
	c, _, err := f.createContainer(pod, "app", 1000)
	require.NoError(t, err)
	f.exitContainer(c, 137)
	other := exclusivePod(f, "other")
	_, _, err = f.createContainer(other, "c", 1000)
	require.ErrorContains(t, err, "cannot fit", "the sandbox lives: the CPU stays held")

	dir, err := cgroupDir(pod.Linux.CgroupsPath)
	require.NoError(t, err)
	// The background pinner may still be writing into the sandbox's cgroup
	// (the removal then raced it and failed now and then): let it finish.
	rp.p.waitSandboxesPinned()
	require.NoError(t, os.RemoveAll(filepath.Join(f.hierarchy(), dir))) // the runtime stopped it, and said nothing
	got, _, err := f.createContainer(other, "c", 1000)
	require.NoError(t, err)
	assert.Equal(t, "1", f.cpus(got))
	st := rp.savedState(t)
	assert.Empty(t, st.Held)
}

// TestInvisibleCgroupTreeReleasesNothing: with a cgroup root that is not
// the node's tree (a wrong cgroupRoot, a DaemonSet without the cgroup
// mount), every sandbox's cgroup looks gone. The holds of live pods must
// not be reaped then: the crash-looping container keeps its CPU, the other
// pod is refused, and the log says why nothing was released.
func TestInvisibleCgroupTreeReleasesNothing(t *testing.T) {
	f := newFakeRuntime(t, false)
	elsewhere := t.TempDir()
	rp := startPluginTuned(t, f, vm2, statePath(f), func(p *Plugin) { p.pinner = newCgroupPinner(elsewhere) })
	crash := exclusivePod(f, "crash")
	c, _, err := f.createContainer(crash, "app", 1000)
	require.NoError(t, err)
	f.exitContainer(c, 2)
	other := exclusivePod(f, "other")
	_, _, err = f.createContainer(other, "c", 1000)
	require.ErrorContains(t, err, "cannot fit", "the crash-looping container's CPU is not given away")
	assert.Contains(t, rp.log.String(), "is not under cgroup v1 at "+elsewhere+"; releasing nothing")
	again, _, err := f.createAttempt(crash, "app", 1, 1000)
	require.NoError(t, err)
	assert.Equal(t, "1", f.cpus(again), "its restart gets it back")
}

// TestHoldOfAStoppedSandboxDoesNotMoveARunningContainer: the plugin
// released a stopped pod's CPUs (its sandbox stopped; the kubelet has not
// removed it yet) and placed a new container on them; a kill -9 kept both
// from the file. At the restart the runtime still lists the stopped
// sandbox, so the remembered container becomes a hold again, before the
// container the file does not know is taken in where it runs: the hold,
// a memory, won over a running container, which was moved (RestoreHold
// says the runtime is the truth): the running container is
// taken in where it runs before the holds are restored.
func TestHoldOfAStoppedSandboxDoesNotMoveARunningContainer(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, xeon, statePath(f))
	old := f.runPod(podSpec{name: "old", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	s, _, err := f.createContainer(old, "c", 2000)
	require.NoError(t, err)
	sCPUs := f.cpus(s)
	require.NoError(t, first.p.Flush())
	f.stopContainer(s)
	f.stopPod(old) // the sandbox stops; it stays listed until removed
	newer := f.runPod(podSpec{name: "new", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	u, _, err := f.createContainer(newer, "c", 2000)
	require.NoError(t, err)
	uCPUs := f.cpus(u)
	t.Logf("stopped container had %s; the new one runs on %s", sCPUs, uCPUs)
	require.Equal(t, sCPUs, uCPUs, "the new container got the freed CPUs (precondition)")
	first.kill()

	second := startPlugin(t, f, xeon, statePath(f))
	t.Logf("after restart: new container on %s, holds %v", f.cpus(u), second.p.alloc.Holds())
	assert.Equal(t, uCPUs, f.cpus(u), "a running container is not moved for a hold of a stopped sandbox")
}
