package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/state"
)

// setRuntimeMems makes the runtime run a container with other mems, as the
// kubelet's Memory Manager (or anything writing cpuset.mems) would.
func setRuntimeMems(f *fakeRuntime, c *api.Container, mems string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c.Linux.Resources.Cpu.Mems = mems
}

// TestRememberedMemoryOnRuntimeMems: a remembered container's memory is
// counted on the nodes of the mems the runtime runs it with, not on those
// the state file names: the runtime is the truth about where its pages
// are. The state here says node 0 (a record from before a change the
// plugin never saw); the container runs with mems 1, where its hugepages
// are.
func TestRememberedMemoryOnRuntimeMems(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, vmHugePages, statePath(f))
	withHugePages(f, 16)
	a, _, err := f.createContainer(exclusivePod(f, "a"), "dpdk", 1000)
	require.NoError(t, err)
	require.Equal(t, "1", a.Linux.Resources.Cpu.Mems)

	rp.stop()
	st := rp.savedState(t)
	c := st.Containers[a.Id]
	c.Mems, c.Memory = "0", "0:memory=67108864,2048kB=16"
	st.Containers[a.Id] = c
	require.NoError(t, state.NewFileStore(statePath(f)).Save(st))
	rp = startPlugin(t, f, vmHugePages, statePath(f))

	rp.p.mu.Lock()
	use := rp.p.alloc.MemoryUse()
	rp.p.mu.Unlock()
	assert.Equal(t, []numamem.NodeMemoryUse{{Node: 1, Memory: 64 << 20, HugePages: map[int64]int64{2048: 16}}}, use, "counted where it runs")
	saved := rp.savedState(t).Containers[a.Id]
	assert.Equal(t, "1", saved.Mems)
	assert.Equal(t, "1:memory=67108864,2048kB=16", saved.Memory)
	assert.Contains(t, rp.log.String(), "runs with mems 1, the plugin wrote 0", "the difference is warned about")
}

// TestAdoptedContainerKeepsItsOwnHugePages is issue 41, item 7 through the
// real ttRPC: two containers hold node 1's 32 pages and have faulted them
// in (free_hugepages 0). A kill -9 loses the record of one, and the
// runtime runs it unpinned (created without the plugin's reply). At the
// restart Synchronize places it anew: its 16 pages are missing from the
// free count because they are its own, so it is placed on node 1 with
// them, not refused and confined to infra.
func TestAdoptedContainerKeepsItsOwnHugePages(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, vmHugePages, statePath(f))
	withHugePages(f, 16)
	a, _, err := f.createContainer(exclusivePod(f, "a"), "dpdk", 1000)
	require.NoError(t, err)
	b, _, err := f.createContainer(exclusivePod(f, "b"), "dpdk", 1000)
	require.NoError(t, err)
	require.Equal(t, "1", a.Linux.Resources.Cpu.Mems)
	require.Equal(t, "1", b.Linux.Resources.Cpu.Mems)
	setFreeHugePages(t, f, "0") // both faulted their pages in

	rp.stop()
	st := rp.savedState(t)
	delete(st.Containers, a.Id)
	require.NoError(t, state.NewFileStore(statePath(f)).Save(st))
	f.setCPUs(a, "")
	setRuntimeMems(f, a, "")
	rp = startPlugin(t, f, vmHugePages, statePath(f))

	assert.NotContains(t, rp.log.String(), "confined to infra")
	assert.Contains(t, []string{"2", "3"}, f.cpus(a), "pinned again to a CPU of node 1, where its pages are")
	assert.Equal(t, "1", a.Linux.Resources.Cpu.Mems)
	rp.p.mu.Lock()
	use := rp.p.alloc.MemoryUse()
	rp.p.mu.Unlock()
	assert.Equal(t, []numamem.NodeMemoryUse{{Node: 1, Memory: 2 * 64 << 20, HugePages: map[int64]int64{2048: 32}}}, use)
	assert.Equal(t, "1:memory=67108864,2048kB=16", rp.savedState(t).Containers[a.Id].Memory)
}
