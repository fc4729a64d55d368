package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

// The kubelet caps cpu.shares at 262144 (MaxShares), 256 CPUs: every
// larger request comes with the same shares. A Guaranteed container's
// limit is its request, so its quota tells the size (300 CPUs, not 256);
// for any other the exact request cannot be known, and the exclusive
// pools refuse it rather than pin too few CPUs.
func TestRequestAboveTheKubeletsMaxShares(t *testing.T) {
	cpu := func(quota int64) *api.LinuxCPU {
		c := &api.LinuxCPU{Shares: api.UInt64(262144), Period: api.UInt64(100000)}
		if quota > 0 {
			c.Quota = api.Int64(quota)
		}
		return c
	}
	for _, tc := range []struct {
		name, qos string
		quota     int64
		want      int64
		atLeast   bool
	}{
		{"guaranteed 300 CPUs", "guaranteed", 300 * 100000, 300000, false},
		{"guaranteed 256 CPUs", "guaranteed", 256 * 100000, 256000, false},
		{"guaranteed, no quota", "guaranteed", 0, 256000, true},
		{"burstable, limit 400", "burstable", 400 * 100000, 256000, true},
		{"besteffort?", "besteffort", 0, 256000, true},
		{"no pod cgroup", "", 300 * 100000, 256000, true},
	} {
		milli, atLeast := milliOf(cpu(tc.quota), tc.qos)
		assert.Equal(t, tc.want, milli, tc.name)
		assert.Equal(t, tc.atLeast, atLeast, tc.name)
	}
	milli, atLeast := milliOf(&api.LinuxCPU{Shares: api.UInt64(262142), Quota: api.Int64(400 * 100000), Period: api.UInt64(100000)}, "burstable")
	assert.Equal(t, int64(255999), milli, "below the cap the shares are exact (255999m: 262142 shares)")
	assert.False(t, atLeast)
}

// Through the plugin, on 384 CPUs (368 exclusive): a Guaranteed container
// asking 300 CPUs gets 300, and grows in place to 310; a Burstable one
// asking 300 (limit 340) is refused with the reason, never pinned to 256
// CPUs nor sized by its limit.
func TestExclusiveRequestAboveTheKubeletsMaxShares(t *testing.T) {
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, epyc, statePath(f))
	limits := map[string]int64{"guaranteed": 300, "burstable": 340}
	f.dress = func(c *api.Container) { // as the kubelet passes 300 CPUs and the limit
		c.Linux.Resources.Cpu.Shares = api.UInt64(262144)
		c.Linux.Resources.Cpu.Quota = api.Int64(limits[c.Name] * 100000)
	}
	bpod := f.runPod(podSpec{name: "b", qos: "burstable", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err := f.createContainer(bpod, "burstable", 300000)
	require.Error(t, err)
	assert.ErrorContains(t, err, "cpu.shares 262144")
	gpod := f.runPod(podSpec{name: "g", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	g, _, err := f.createContainer(gpod, "guaranteed", 300000)
	require.NoError(t, err)
	assert.Equal(t, 300, mustCPUs(t, f.cpus(g)).Size())
	_, err = f.r.UpdateContainer(t.Context(), &api.UpdateContainerRequest{Pod: gpod, Container: g,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(262144), Quota: api.Int64(310 * 100000), Period: api.UInt64(100000)}}})
	require.NoError(t, err)
	rp.p.mu.Lock()
	a, _ := rp.p.alloc.Get(g.Id)
	rp.p.mu.Unlock()
	assert.Equal(t, 310, a.CPUs.Size())
	assert.Equal(t, int64(310000), a.MilliCPU)
}

// An update that shows a 300-CPU Guaranteed exclusive container's shares
// at the kubelet's cap without a CFS quota (a kubelet now run with
// cpuCFSQuota: false, resizing its memory) reads as "at least 256000m",
// which its recorded 300000m is: no CPU resize. Before, it was taken for a
// resize to 256000m and refused, failing the whole update (and the memory
// resize in it) with a CPUPoolResizeRefused event for a resize nobody
// asked for.
func TestUpdateAtTheSharesCapIsNoResizeOfALargerExclusiveContainer(t *testing.T) {
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f := newFakeRuntime(t, false)
	events := &eventLog{}
	rp := startPlugin(t, f, epyc, statePath(f), withEvents(events))
	f.dress = func(c *api.Container) { // as the kubelet passes 300 CPUs
		c.Linux.Resources.Cpu.Shares = api.UInt64(262144)
		c.Linux.Resources.Cpu.Quota = api.Int64(300 * 100000)
	}
	pod := f.runPod(podSpec{name: "g", qos: "guaranteed", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	g, _, err := f.createContainer(pod, "big", 300000)
	require.NoError(t, err)
	before := f.cpus(g)
	_, err = f.r.UpdateContainer(t.Context(), &api.UpdateContainerRequest{Pod: pod, Container: g,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(262144), Period: api.UInt64(100000)}}})
	require.NoError(t, err, "no resize to refuse")
	rp.p.mu.Lock()
	a, _ := rp.p.alloc.Get(g.Id)
	rp.p.mu.Unlock()
	assert.Equal(t, 300, a.CPUs.Size())
	assert.Equal(t, int64(300000), a.MilliCPU)
	assert.Equal(t, before, f.cpus(g))
	assert.Equal(t, 0.0, testutil.ToFloat64(rp.p.metrics.resizes.WithLabelValues("exclusive", "refused")))
	assert.Empty(t, events.of(EventResizeRefused))
}
