package plugin

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

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
