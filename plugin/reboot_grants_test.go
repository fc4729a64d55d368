package plugin

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rebootEmptied stops the plugin and empties the runtime, as a node reboot
// does with CRI-O (which removes its containers and sandboxes after a
// reboot), then starts the plugin again from its files.
func rebootEmptied(t *testing.T, f *fakeRuntime, before *runningPlugin) *runningPlugin {
	t.Helper()
	before.stop()
	f.mu.Lock()
	clear(f.pods)
	clear(f.ctrs)
	f.mu.Unlock()
	return startPlugin(t, f, desktopKubelet, statePath(f))
}

// rerunPod runs a pod again in a new sandbox, same UID, as the kubelet
// does after a reboot from its checkpoint.
func rerunPod(t *testing.T, f *fakeRuntime, pod *api.PodSandbox) *api.PodSandbox {
	t.Helper()
	fresh := &api.PodSandbox{Id: pod.Id + "-1", Name: pod.Name, Uid: pod.Uid, Namespace: pod.Namespace,
		Linux: &api.LinuxPodSandbox{CgroupParent: pod.Linux.CgroupParent, CgroupsPath: pod.Linux.CgroupParent + "/" + pod.Id + "-1"}}
	f.mkCgroup(fresh.Linux.CgroupsPath)
	f.mu.Lock()
	f.pods[fresh.Id] = fresh
	f.mu.Unlock()
	require.NoError(t, f.r.RunPodSandbox(t.Context(), &api.RunPodSandboxRequest{Pod: fresh}))
	return fresh
}

// TestGrantSurvivesARebootThatEmptiedTheRuntime: the grants file is
// fsynced so that the kubelet's checkpointed tokens work after a node
// reboot (docs/kubernetes.md). A runtime that starts empty after a reboot
// (CRI-O wipes its containers and pods) reports no pod at Synchronize, and
// the kubelet then re-creates each pod (same UID, new sandbox) with the
// token of its checkpoint: Allocate is not called again. Synchronize keeps
// the grants of the pods it does not see, so that container is admitted on
// its CPUs; the grant goes with the re-created pod's removal.
func TestGrantSurvivesARebootThatEmptiedTheRuntime(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, first.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	_, resp, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)

	second := rebootEmptied(t, f, first)
	assert.Contains(t, second.log.String(), "1 kubelet grants of 1 pods the runtime does not run are kept")
	assert.Equal(t, "4@0 5@0 6@0 7@0 12@0 13@0 14@0 15@0", healthOf(second.p.Devices()), "a kept grant holds no CPU")

	// The kubelet runs the pod again, with its checkpointed allocation.
	fresh := rerunPod(t, f, pod)
	_, resp, err = f.createWithEnv(fresh, "app", 0, env)
	if err != nil {
		t.Fatalf("the kubelet's checkpointed token is refused after the reboot: %v", err)
	}
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	other := f.runPod(podSpec{name: "other", namespace: "telco"})
	_, _, err = f.createWithEnv(other, "app", 0, env)
	require.ErrorContains(t, err, "the grant belongs to container telco/dpdk/app", "the kept grant is still its pod's only")

	f.removePod(fresh)
	assert.Empty(t, grantsInMemory(second.p), "the grant went with the re-created pod")
	require.NoError(t, second.p.Flush())
	assert.Empty(t, grantsOnDisk(t, GrantsFile(statePath(f))))
}

// TestGrantOfAPodDeletedDuringTheRebootGoesWithItsCPUs: a pod deleted while
// the node was down is never re-created, so its kept grant is not shown
// again and no RemovePodSandbox comes for it. The kubelet, having released
// its devices, allocates its CPUs to another pod: the allocation is
// accepted (the CPUs are free; the kept grant holds none), the new pod is
// pinned on them, and its binding drops the kept grant, whose token is
// refused from then on.
func TestGrantOfAPodDeletedDuringTheRebootGoesWithItsCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	gone := grantEnv(t, first.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	_, _, err := f.createWithEnv(pod, "app", 0, gone)
	require.NoError(t, err)

	second := rebootEmptied(t, f, first)
	next := grantEnv(t, second.p, "6")
	other := f.runPod(podSpec{name: "other", namespace: "telco"})
	_, resp, err := f.createWithEnv(other, "app", 0, next)
	require.NoError(t, err)
	assert.Equal(t, "6", resp.Adjust.Linux.Resources.Cpu.Cpus)
	assert.Equal(t, []string{strings.TrimPrefix(next, EnvGrant+"=")}, keysOf(grantsInMemory(second.p)), "the deleted pod's grant went when its CPUs were bound again")
	assertEveryCPUAccounted(t, f, second.p)

	fresh := rerunPod(t, f, pod)
	_, _, err = f.createWithEnv(fresh, "app", 0, gone)
	require.ErrorContains(t, err, "unknown grant token")
}

// TestGrantsOfAbsentPodsAreBounded: the kept grants of pods the runtime
// does not run count towards the bound on unbound grants, after the
// allocations no container ever showed: a pod that is only absent may
// still be re-created with its token.
func TestGrantsOfAbsentPodsAreBounded(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	kept := grantEnv(t, first.p, "6", "14")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	_, _, err := f.createWithEnv(pod, "app", 0, kept)
	require.NoError(t, err)

	second := rebootEmptied(t, f, first)
	limit := maxUnboundGrants(8)
	oldest := grantEnv(t, second.p, "4")
	for range limit - 1 {
		grantEnv(t, second.p, "5")
	}
	mem := grantsInMemory(second.p)
	assert.Equal(t, limit, len(mem), "the absent pod's grant counts: one of limit+1 was forgotten")
	_, ok := mem[strings.TrimPrefix(kept, EnvGrant+"=")]
	assert.True(t, ok, "an allocation no container showed goes before the absent pod's grant")
	_, ok = mem[strings.TrimPrefix(oldest, EnvGrant+"=")]
	assert.False(t, ok, "the oldest allocation no container showed went first")
	assert.Contains(t, second.log.String(), "the oldest 1 (CPUs 4) forgotten")
}

func keysOf(m map[string]grant) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
