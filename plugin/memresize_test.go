package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/numamem"
)

// updateResources sends the runtime's UpdateContainer of an in-place
// resize that carries a CPU request (as cpu.shares) and a memory limit, as
// the kubelet's UpdateContainerResources does, and applies it as the
// runtime would: a later Synchronize reports the new limit.
func (f *fakeRuntime) updateResources(pod *api.PodSandbox, ctr *api.Container, milli, memory int64) (*api.UpdateContainerResponse, error) {
	shares := uint64(milli * 1024 / 1000)
	resp, err := f.r.UpdateContainer(f.t.Context(), &api.UpdateContainerRequest{Pod: pod, Container: ctr,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(shares), Quota: api.Int64(milli * 100), Period: api.UInt64(100000)},
			Memory: &api.LinuxMemory{Limit: api.Int64(memory)}}})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ctr.Linux.Resources.Cpu.Shares = api.UInt64(shares)
	ctr.Linux.Resources.Memory = &api.LinuxMemory{Limit: api.Int64(memory)}
	f.apply(resp.GetUpdate())
	return resp, nil
}

func (rp *runningPlugin) memoryUse() []numamem.NodeMemoryUse {
	rp.p.mu.Lock()
	defer rp.p.mu.Unlock()
	return rp.p.alloc.MemoryUse()
}

// TestInPlaceMemoryResizeIsCounted is issue 41, item 6 through the real
// ttRPC, on the 2-node VM (4 GiB a node, node 1's 64 MiB of hugepages part
// of it): the kubelet raises a running container's memory limit from 64
// MiB to 3 GiB in place. The account counts the new limit: the state
// file, the status figures and the DRA offer say so at once, and the next
// container, which node 1 alone no longer holds, gets memory of node 0 too
// instead of over-committing node 1. A limit its node cannot hold is
// counted there anyway, with a warning; a resize of CPU and memory at once
// counts both; a restart finds the runtime and the state in agreement.
func TestInPlaceMemoryResizeIsCounted(t *testing.T) {
	const mib = int64(1) << 20
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, vmHugePages, statePath(f))
	withHugePages(f, 16)
	podA := exclusivePod(f, "a")
	a, _, err := f.createContainer(podA, "dpdk", 1000)
	require.NoError(t, err)
	require.Equal(t, "1", a.Linux.Resources.Cpu.Mems)

	_, err = f.updateResources(podA, a, 1000, 3<<30)
	require.NoError(t, err)
	assert.Equal(t, []numamem.NodeMemoryUse{{Node: 1, Memory: 3 << 30, HugePages: map[int64]int64{2048: 16}}}, rp.memoryUse())
	st := rp.savedState(t)
	assert.Equal(t, "1:memory=3221225472,2048kB=16", st.Containers[a.Id].Memory, "the state file")
	require.Len(t, st.NUMAMemory, 2)
	assert.Equal(t, 960*mib, *st.NUMAMemory[1].Memory.Free, "status: 4 GiB less 64 MiB of pages and the 3 GiB limit")
	for _, o := range rp.p.MemoryOffer() {
		if o.Node == 1 {
			assert.Equal(t, 960*mib, o.Memory, "the DRA offer")
		}
	}
	assert.Equal(t, "1", a.Linux.Resources.Cpu.Mems, "its memory never moves")

	// B asks 16 pages and 1 GiB: node 1 has the pages but 960 MiB of
	// memory left, so its set of nodes is 0-1.
	f.mu.Lock()
	f.dress = func(ctr *api.Container) {
		ctr.Linux.Resources.HugepageLimits = []*api.HugepageLimit{{PageSize: "2MB", Limit: 16 << 21}}
		ctr.Linux.Resources.Memory = &api.LinuxMemory{Limit: api.Int64(1 << 30)}
	}
	f.mu.Unlock()
	b, _, err := f.createContainer(exclusivePod(f, "b"), "dpdk", 1000)
	require.NoError(t, err)
	assert.Equal(t, "0-1", b.Linux.Resources.Cpu.Mems, "node 1 alone no longer holds it")
	assert.NotContains(t, rp.log.String(), "may be OOM-killed")

	// A grows past what node 1 has: counted there with a warning.
	_, err = f.updateResources(podA, a, 1000, 4<<30)
	require.NoError(t, err)
	assert.Contains(t, rp.log.String(), "memory limit resized from 3Gi to 4Gi: memory: asked 1Gi, free node1 960Mi")
	assert.Equal(t, "1:memory=4294967296,2048kB=16", rp.savedState(t).Containers[a.Id].Memory)
	assert.Equal(t, "1", a.Linux.Resources.Cpu.Mems)

	// CPU and memory at once.
	_, err = f.updateResources(podA, a, 2000, 512*mib)
	require.NoError(t, err)
	assert.Equal(t, 2, mustParse(f.cpus(a)).Size())
	saved := rp.savedState(t).Containers[a.Id]
	assert.Equal(t, int64(2000), saved.MilliCPU)
	assert.Equal(t, "1:memory=536870912,2048kB=16", saved.Memory)

	// A restart derives nothing again: the record is the runtime's.
	use := rp.memoryUse()
	rp.stop()
	rp = startPlugin(t, f, vmHugePages, statePath(f))
	assert.Equal(t, use, rp.memoryUse())
	assert.Equal(t, "1:memory=536870912,2048kB=16", rp.savedState(t).Containers[a.Id].Memory)
}
