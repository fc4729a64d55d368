package plugin

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// xeon is the 2-socket, 80-thread fixture (even CPUs on node 0, siblings N
// and N+40) with 60 exclusive, 8 shared and the rest infra, lending infra
// CPUs to exclusive-non-isolcpus containers.
var xeon = testNode{fixture: "xeon-2s-interleaved", config: `
pools:
  exclusive: {count: 60}
  shared: {count: 8}
  exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 2}
`}

// updateContainer sends the runtime's UpdateContainer with a new CPU
// request (as cpu.shares, the way the kubelet passes it) and applies the
// reply as the runtime would: the container then has the new shares (a
// later Synchronize reports them).
func (f *fakeRuntime) updateContainer(pod *api.PodSandbox, ctr *api.Container, milli int64) (*api.UpdateContainerResponse, error) {
	shares := uint64(milli * 1024 / 1000)
	resp, err := f.r.UpdateContainer(f.t.Context(), &api.UpdateContainerRequest{Pod: pod, Container: ctr,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(shares), Quota: api.Int64(milli * 100), Period: api.UInt64(100000)}}})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ctr.Linux.Resources.Cpu.Shares = api.UInt64(shares)
	f.apply(resp.GetUpdate())
	return resp, nil
}

func updateFor(resp *api.UpdateContainerResponse, id string) *api.ContainerUpdate {
	for _, u := range resp.GetUpdate() {
		if u.GetContainerId() == id {
			return u
		}
	}
	return nil
}

func TestInPlaceResizeOfAnExclusiveContainer(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	original := f.cpus(fwd)
	origSet := mustParse(original)
	node := rp.p.topo.NUMANodesOf(origSet)

	resp, err := f.updateContainer(pod, fwd, 4000)
	require.NoError(t, err)
	require.NotNil(t, updateFor(resp, fwd.Id), "the reply carries the container's new cpuset")
	grown := mustParse(f.cpus(fwd))
	assert.Equal(t, 4, grown.Size())
	assert.True(t, origSet.IsSubsetOf(grown), "keeps every CPU it has: %s ⊂ %s", original, grown)
	assert.Equal(t, node, rp.p.topo.NUMANodesOf(grown), "grows on its own node")
	for _, id := range grown.List() {
		c, _ := rp.p.topo.CPU(id)
		assert.True(t, c.Siblings.IsSubsetOf(grown), "whole cores: %s", grown)
	}

	st := rp.savedState(t)
	assert.Equal(t, grown.String(), st.Containers[fwd.Id].CPUs)
	assert.Equal(t, int64(4000), st.Containers[fwd.Id].MilliCPU)
	assert.NotEmpty(t, st.Containers[fwd.Id].Added)

	// A plugin restart remembers what the resize added.
	rp.stop()
	rp = startPlugin(t, f, xeon, statePath(f))
	_, err = f.updateContainer(pod, fwd, 2000)
	require.NoError(t, err)
	assert.Equal(t, original, f.cpus(fwd), "shrinks back to its original CPUs")

	_, err = f.updateContainer(pod, fwd, 1000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot shrink container telco/dpdk/fwd to 1 CPUs")
	assert.Equal(t, original, f.cpus(fwd))

	// Fill the pool, then a grow is refused with what is free.
	big := f.runPod(podSpec{name: "big", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err = f.createContainer(big, "c", 57000)
	require.NoError(t, err)
	_, err = f.updateContainer(pod, fwd, 4000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot fit container telco/dpdk/fwd grown from 2 to 4 CPUs: it asks for 2 more CPUs, but only 1 of the pool's 60 CPUs is free (free: ")
	assert.Contains(t, err.Error(), "it keeps CPUs "+original)
	assert.Equal(t, original, f.cpus(fwd))
	st = rp.savedState(t)
	assert.Equal(t, original, st.Containers[fwd.Id].CPUs, "nothing changed")
	assert.Equal(t, int64(2000), st.Containers[fwd.Id].MilliCPU)

	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_resizes_total In-place resizes (CPU request changes) by pool and result (grown, shrunk, unchanged, refused).
# TYPE cpupool_resizes_total counter
cpupool_resizes_total{pool="exclusive",result="refused"} 2
cpupool_resizes_total{pool="exclusive",result="shrunk"} 1
`), "cpupool_resizes_total"))
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_pool_free_cpus CPUs of an exclusive pool that no container holds.
# TYPE cpupool_pool_free_cpus gauge
cpupool_pool_free_cpus{pool="exclusive"} 1
cpupool_pool_free_cpus{pool="exclusive-non-isolcpus"} 4
`), "cpupool_pool_free_cpus"))
}

func TestInPlaceResizeOfExclusiveNonIsolcpusMovesInfraInTheSameReply(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, xeon, statePath(f))
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	app, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	infraBefore := mustParse(f.cpus(app))
	pod := f.runPod(podSpec{name: "eni", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	eni, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	assert.Equal(t, infraBefore.Size()-1, mustParse(f.cpus(app)).Size())

	// To 2: infra keeps minInfraCPUs=2 of its 4 CPUs that are not
	// isolated (0-1,40-41).
	resp, err := f.updateContainer(pod, eni, 2000)
	require.NoError(t, err)
	require.NotNil(t, updateFor(resp, app.Id), "infra's member follows in the same reply")
	lent := mustParse(f.cpus(eni))
	assert.Equal(t, 2, lent.Size())
	assert.Equal(t, infraBefore.Difference(lent).String(), f.cpus(app))
	assert.Equal(t, f.cpus(app), f.sandboxCPUs(web), "sandboxes follow (right after the reply)")
	assert.Equal(t, f.cpus(app), f.sandboxCPUs(pod))

	resp, err = f.updateContainer(pod, eni, 1000)
	require.NoError(t, err)
	require.NotNil(t, updateFor(resp, app.Id))
	assert.Equal(t, infraBefore.Size()-1, mustParse(f.cpus(app)).Size(), "infra grows back")
	assert.Equal(t, f.cpus(app), f.sandboxCPUs(web))
}

func TestInPlaceResizeOfSharedAndInfraChangesNoCpuset(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, xeon, statePath(f))
	pod := f.runPod(podSpec{name: "p", annotations: map[string]string{"pool.cpupool.dev/container.s": "shared"}})
	s, _, err := f.createContainer(pod, "s", 500)
	require.NoError(t, err)
	i, _, err := f.createContainer(pod, "i", 500)
	require.NoError(t, err)
	sharedCPUs, infraCPUs := f.cpus(s), f.cpus(i)
	for _, c := range []*api.Container{s, i} {
		_, err := f.updateContainer(pod, c, 3000)
		require.NoError(t, err)
	}
	assert.Equal(t, sharedCPUs, f.cpus(s))
	assert.Equal(t, infraCPUs, f.cpus(i))
	st := rp.savedState(t)
	assert.Equal(t, int64(3000), st.Containers[s.Id].MilliCPU, "the new request is recorded")
}

func TestInPlaceResizeStaysInItsL3GroupOnALargeNode(t *testing.T) {
	// 384 CPUs, 8 NUMA nodes, L3 groups of 8 cores (16 threads).
	epyc := testNode{fixture: "epyc-2s-384", config: `pools: {exclusive: {cpus: "8-191,200-383"}}`}
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, epyc, statePath(f))
	pod := f.runPod(podSpec{name: "ml", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	// c takes 3 cores of a group; other takes 6 cores of the next, which
	// is then the fullest group that could hold c's 2 more cores.
	c, _, err := f.createContainer(pod, "c", 6000)
	require.NoError(t, err)
	_, _, err = f.createContainer(pod, "other", 12000)
	require.NoError(t, err)
	before := mustParse(f.cpus(c))
	_, err = f.updateContainer(pod, c, 10000)
	require.NoError(t, err)
	after := mustParse(f.cpus(c))
	require.Equal(t, 10, after.Size())
	assert.True(t, before.IsSubsetOf(after))
	l3 := map[int]bool{}
	for _, id := range after.List() {
		cpu, _ := rp.p.topo.CPU(id)
		l3[cpu.L3] = true
	}
	assert.Len(t, l3, 1, "one L3 group: %s", after)
}
