package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

func mustCPUs(t *testing.T, s string) cpuset.CPUSet {
	set, err := cpuset.Parse(s)
	require.NoError(t, err)
	return set
}

// A tenant asks requests.cpu: 1m and limits.cpu: 8. The kubelet passes
// cpu.shares 2 (its minimum, also for no request) and the quota of 8 CPUs.
// The exclusive size is the CPU request, which the scheduler counted as
// 1m: the limit must never stand in for it, or the container takes the
// whole exclusive pool and every other exclusive pod is refused. Such a
// request is below what shares can tell from none, so it gets the
// exclusive pools' refusal of a container without a request.
func TestTinyRequestWithBigLimitIsNotSizedByTheLimit(t *testing.T) {
	// Each limit is the pool's whole size on this node.
	for pool, limit := range map[string]int64{"exclusive": 8, "exclusive-non-isolcpus": 2} {
		t.Run(pool, func(t *testing.T) {
			f := newFakeRuntime(t, true)
			startPlugin(t, f, desktop, statePath(f))
			f.dress = func(c *api.Container) {
				if c.Name == "greedy" {
					c.Linux.Resources.Cpu.Quota = api.Int64(limit * 100000) // requests.cpu: 1m (shares 2)
				}
			}
			pod := f.runPod(podSpec{name: "greedy", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": pool}})
			g, _, err := f.createContainer(pod, "greedy", 0)
			if err == nil {
				t.Fatalf("a 1m request with limit %d was placed on %s", limit, f.cpus(g))
			}
			assert.ErrorContains(t, err, "requests no CPU")
			other := f.runPod(podSpec{name: "victim", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": pool}})
			v, _, err := f.createContainer(other, "app", 1000)
			require.NoError(t, err)
			assert.Equal(t, 1, mustCPUs(t, f.cpus(v)).Size())
		})
	}
}

// The same through an in-place resize: a running exclusive container of 2
// CPUs resized to requests.cpu 1m, limits.cpu 8 (shares 2, quota 8 CPUs)
// must not grow to 8 CPUs.
func TestResizeToTinyRequestIsNotSizedByTheLimit(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, 2, mustCPUs(t, f.cpus(fwd)).Size())
	resp, err := f.r.UpdateContainer(t.Context(), &api.UpdateContainerRequest{Pod: pod, Container: fwd,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2), Quota: api.Int64(8 * 100000), Period: api.UInt64(100000)}}})
	require.NoError(t, err)
	for _, u := range resp.GetUpdate() {
		if cpus := u.GetLinux().GetResources().GetCpu().GetCpus(); cpus != "" {
			assert.Equal(t, 2, mustCPUs(t, cpus).Size(), "update for %s", u.GetContainerId())
		}
	}
	rp.p.mu.Lock()
	a, _ := rp.p.alloc.Get(fwd.Id)
	rp.p.mu.Unlock()
	assert.Equal(t, 2, a.CPUs.Size(), "record: %s", a.CPUs)
	assert.Equal(t, int64(2000), a.MilliCPU)
}
