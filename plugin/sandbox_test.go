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
