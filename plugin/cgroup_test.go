package plugin

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

func TestSetAffinity(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	require.NoError(t, setAffinity(uint32(cmd.Process.Pid), cpuset.New(0)))
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	require.NoError(t, err)
	assert.Contains(t, string(status), "Cpus_allowed_list:\t0\n")
	assert.Error(t, setAffinity(uint32(cmd.Process.Pid), cpuset.New(1000)), "no such CPU")
}

func TestCgroupDir(t *testing.T) {
	for in, want := range map[string]string{
		"/kubepods/burstable/pod1/abc":                        "/kubepods/burstable/pod1/abc",
		"kubepods/pod1/abc":                                   "/kubepods/pod1/abc",
		"kubepods-burstable-pod1.slice:cri-containerd:abc":    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-abc.scope",
		"system.slice:crio:abc":                               "/system.slice/crio-abc.scope",
		"kubepods-pod1.slice:crio:kubepods-pod1-conmon.slice": "/kubepods.slice/kubepods-pod1.slice/kubepods-pod1-conmon.slice",
	} {
		got, err := cgroupDir(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := cgroupDir("bad-.slice:x:y")
	assert.Error(t, err)
	_, err = cgroupDir("")
	assert.ErrorIs(t, err, errNoCgroup)
}

// TestCRIOPodWithoutInfraContainer: CRI-O (drop_infra_ctr) runs no pause
// process for most pods (Pid 0) but still creates the pod's cgroup at
// <parent>/crio-<id>; it stays on infra and follows infra's changes. Its NRI
// container names come from the kubelet's label.
func TestCRIOPodWithoutInfraContainer(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	web := f.runPod(podSpec{name: "web", qos: "burstable", crio: true})
	assert.Equal(t, uint32(0), web.GetPid())
	assert.Equal(t, "0-1,8-9", f.sandboxCPUs(web), "the empty sandbox cgroup is pinned to infra")
	app, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	eni := f.runPod(podSpec{name: "eni", namespace: "telco", crio: true, annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	ctr := &api.Container{Id: "crio-named", PodSandboxId: eni.Id, Labels: map[string]string{"io.kubernetes.container.name": "c"},
		Linux: &api.LinuxContainer{CgroupsPath: eni.Linux.CgroupParent + "/crio-named",
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(1024)}}}}
	resp, err := f.r.CreateContainer(t.Context(), &api.CreateContainerRequest{Pod: eni, Container: ctr})
	require.NoError(t, err)
	assert.Equal(t, "1", resp.Adjust.Linux.Resources.Cpu.Cpus)
	f.apply(resp.Update)
	assert.Equal(t, "0,8-9", f.cpus(app), "infra shrank")
	assert.Equal(t, "0,8-9", f.sandboxCPUs(web), "so did the pod's cgroup")

	st := rp.savedState(t)
	assert.Equal(t, "c", st.Containers["crio-named"].Container, "named from the label")
}
