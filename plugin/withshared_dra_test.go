package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// A container of a DRA claim that also asks for the shared pool runs on
// its claim's CPUs plus the shared pool, as on the annotation and device
// plugin routes: the claim's CPUs are the exclusive part, the environment
// tells the two apart, the quota is lifted, and the state remembers the
// shared part.
func TestWithSharedOnTheDRARoute(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRA(t, f)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort",
		annotations: map[string]string{"shared-cpus.cpupool.dev/container.fwd": "true"}})
	env := n.prepare(t, "uid-1", 1, 4, pod)
	exclusive := n.claimCPUs(t, "uid-1")
	shared := n.p.alloc.PoolCPUs("shared")
	require.False(t, shared.IsEmpty(), "the node has a shared pool")

	_, resp, err := f.createWithEnv(pod, "fwd", 10, env...)
	require.NoError(t, err)
	claimed, perr := cpuset.Parse(exclusive)
	require.NoError(t, perr)
	want := claimed.Union(shared)
	assert.Equal(t, want.String(), resp.Adjust.Linux.Resources.Cpu.Cpus)
	assert.Equal(t, exclusive, envOf(resp)[EnvExclusiveCPUs])
	assert.Equal(t, shared.String(), envOf(resp)[EnvSharedCPUs])
	assert.Equal(t, "1", resp.Adjust.Linux.Resources.Cpu.Mems, "memory of the exclusive part's node only")
	q, set := quotaOf(resp.GetAdjust().GetLinux().GetResources())
	assert.True(t, set)
	assert.Equal(t, int64(-1), q)

	var found bool
	for _, c := range n.savedState(t).Containers {
		if c.Container == "fwd" {
			found = true
			assert.Equal(t, exclusive, c.CPUs, "the claim's CPUs are the exclusive part")
			assert.True(t, c.WithShared)
			assert.Equal(t, shared.String(), c.SharedCPUs)
		}
	}
	assert.True(t, found)
}
