package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/state"
)

// vmHugePages is issue 31's VM: 2 NUMA nodes of 2 CPUs, 32 pages of 2 MiB
// reserved on node 1 only; CPU 0 is infra.
var vmHugePages = testNode{fixture: "vm-2numa-hugepages", config: `
isolatedCPUs: "1-3"
pools:
  exclusive: {cpus: "1-3"}
`}

// withHugePages makes every container the runtime creates ask for pages
// of 2 MiB (its spec's hugepage limit) and 64 MiB of memory.
func withHugePages(f *fakeRuntime, pages uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dress = func(ctr *api.Container) {
		ctr.Linux.Resources.HugepageLimits = []*api.HugepageLimit{{PageSize: "2MB", Limit: pages << 21}}
		ctr.Linux.Resources.Memory = &api.LinuxMemory{Limit: api.Int64(64 << 20)}
	}
}

// setFreeHugePages writes node 1's free_hugepages, as the kernel shows
// pages a process outside the plugin's knowledge took.
func setFreeHugePages(t *testing.T, f *fakeRuntime, free string) {
	dir := filepath.Join(f.sysfsRoot("vm-2numa-hugepages"), "sys/devices/system/node/node1/hugepages/hugepages-2048kB")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "free_hugepages"), []byte(free+"\n"), 0o644))
}

// TestHugePagesFollowTheCPUs is issue 31 through the real ttRPC: an
// exclusive container that asks for 16 pages of 2 MiB gets its CPU and its
// mems on node 1, the only node with hugepages (today it is pinned to node
// 0 and its mmap fails); pages taken by something the plugin does not know
// are not free; the third such container is refused at creation with what
// each node has; and the count survives a kill -9 and a state file of the
// previous version, which Synchronize completes from the runtime.
func TestHugePagesFollowTheCPUs(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, vmHugePages, statePath(f))
	withHugePages(f, 16)

	setFreeHugePages(t, f, "10") // a host process took 22 pages
	_, _, err := f.createContainer(exclusivePod(f, "early"), "dpdk", 1000)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 16, free node0 0 node1 10")
	setFreeHugePages(t, f, "32")

	podA := exclusivePod(f, "a")
	a, resp, err := f.createContainer(podA, "dpdk", 1000)
	require.NoError(t, err)
	assert.Contains(t, []string{"2", "3"}, f.cpus(a), "a CPU of node 1")
	assert.Equal(t, "1", resp.GetAdjust().GetLinux().GetResources().GetCpu().GetMems())
	b, _, err := f.createContainer(exclusivePod(f, "b"), "dpdk", 1000)
	require.NoError(t, err)
	assert.Equal(t, "1", b.Linux.Resources.Cpu.Mems)

	_, _, err = f.createContainer(exclusivePod(f, "c"), "dpdk", 1000)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 16, free node0 0 node1 0")
	assert.Equal(t, "1:memory=67108864,2048kB=16", rp.savedState(t).Containers[a.Id].Memory)

	// kill -9, and a state file as the previous version wrote it.
	rp.kill()
	st := rp.savedState(t)
	for id, c := range st.Containers {
		c.Memory = ""
		st.Containers[id] = c
	}
	require.NoError(t, state.NewFileStore(statePath(f)).Save(st))
	rp = startPlugin(t, f, vmHugePages, statePath(f))
	_, _, err = f.createContainer(exclusivePod(f, "d"), "dpdk", 1000)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 16, free node0 0 node1 0", "the runtime's containers still hold their pages")
	assert.Equal(t, "1:memory=67108864,2048kB=16", rp.savedState(t).Containers[a.Id].Memory, "derived again")

	f.removeContainer(a)
	f.removePod(podA)
	e, _, err := f.createContainer(exclusivePod(f, "e"), "dpdk", 1000)
	require.NoError(t, err, "pod a's end gave its pages back")
	assert.Equal(t, "1", e.Linux.Resources.Cpu.Mems)
}

// TestPagesTakenSinceTheLastReadOnTheNodeChosen: both nodes had pages at
// the last read (the plugin's start), so the decision reads again only the
// node the CPU rules choose (allocator/hugelive.go): node 0, whose one
// free CPU fits best. A host process took node 0's pages since. The check
// of node 0 sees it, and the containers are pinned to node 1, where their
// pages are, never to the node without them.
func TestPagesTakenSinceTheLastReadOnTheNodeChosen(t *testing.T) {
	f := newFakeRuntime(t, true)
	root := f.sysfsRoot(vmHugePages.fixture)
	reserveHugePages(t, root, 2, 32)
	startPlugin(t, f, vmHugePages, statePath(f))
	withHugePages(f, 8)
	probePod := exclusivePod(f, "probe")
	probe, _, err := f.createContainer(probePod, "dpdk", 1000)
	require.NoError(t, err)
	require.Equal(t, "0", probe.Linux.Resources.Cpu.Mems, "the CPU rules choose node 0 first")
	f.removeContainer(probe)
	f.removePod(probePod) // its CPU and pages are free again

	dir := filepath.Join(root, "sys/devices/system/node/node0/hugepages/hugepages-2048kB")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "free_hugepages"), []byte("3\n"), 0o644)) // a host process took 29
	for _, name := range []string{"a", "b"} {
		ctr, _, err := f.createContainer(exclusivePod(f, name), "dpdk", 1000)
		require.NoError(t, err)
		assert.Equal(t, "1", ctr.Linux.Resources.Cpu.Mems, "container %s is pinned to node 1, not to node 0, which has 3 free pages", name)
	}
}

// TestHugePageLimitsAreBounded: a malformed page size is refused before
// the lock, with a short echo.
func TestHugePageLimitsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		limits []*api.HugepageLimit
		err    string
	}{
		{[]*api.HugepageLimit{{PageSize: "3MB", Limit: 1 << 21}}, `hugepage size "3MB"`},
		{[]*api.HugepageLimit{{PageSize: "2MB", Limit: 1}, {PageSize: "2MB", Limit: 1}}, "limited twice"},
		{make([]*api.HugepageLimit, 9), "9 hugepage limits"},
		{[]*api.HugepageLimit{{PageSize: string(make([]byte, 4096)), Limit: 1}}, "is not a size"},
		// Sizes whose bytes wrap an int64: to 0 (a division by zero that
		// killed the plugin) and to its minimum (a count of 0).
		{[]*api.HugepageLimit{{PageSize: "16777216TB", Limit: 1 << 21}}, `hugepage size "16777216TB"`},
		{[]*api.HugepageLimit{{PageSize: "8388608TB", Limit: 1 << 21}}, "is not a size"},
		{[]*api.HugepageLimit{{PageSize: "32GB", Limit: 1 << 35}}, "is not a size"},
	} {
		ctr := &api.Container{Linux: &api.LinuxContainer{Resources: &api.LinuxResources{HugepageLimits: tc.limits}}}
		_, err := demandOf(ctr)
		require.ErrorContains(t, err, tc.err)
		assert.Less(t, len(err.Error()), 200) // the echo of a value is at most 128 quoted bytes and its size
	}
	d, err := demandOf(&api.Container{Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
		HugepageLimits: []*api.HugepageLimit{{PageSize: "1GB", Limit: 3 << 30}, {PageSize: "2MB", Limit: 5 << 20}, {PageSize: "64KB"}},
		Memory:         &api.LinuxMemory{Limit: api.Int64(1 << 62)}}}})
	require.NoError(t, err)
	for _, p := range d.HugePages {
		assert.Positive(t, p.Count, "every count is positive")
	}
	big, err := demandOf(&api.Container{Linux: &api.LinuxContainer{Resources: &api.LinuxResources{
		HugepageLimits: []*api.HugepageLimit{{PageSize: "16GB", Limit: 1 << 34}}}}})
	require.NoError(t, err, "16 GiB pages exist (POWER)")
	assert.Equal(t, []numamem.Pages{{SizeKB: 16 << 20, Count: 1}}, big.HugePages)
	assert.Equal(t, "0:memory=1125899906842624,2048kB=3,1048576kB=3", formatMemory([]numamem.NodeMemory{{Memory: d.Memory, HugePages: d.HugePages}}),
		"pages rounded up, sizes sorted, a limit of 0 asks nothing, the memory capped")
}

// TestMalformedHugePagesRefuseOnlyExclusive: a container's hugepage limits
// count only where the plugin pins its mems (an exclusive container);
// shared and infra containers keep their rules, which never read them, so
// a page size the plugin cannot read does not refuse them.
func TestMalformedHugePagesRefuseOnlyExclusive(t *testing.T) {
	f := newFakeRuntime(t, true)
	startPlugin(t, f, vmHugePages, statePath(f))
	f.mu.Lock()
	f.dress = func(ctr *api.Container) {
		ctr.Linux.Resources.HugepageLimits = []*api.HugepageLimit{{PageSize: "3MB", Limit: 3 << 20}}
	}
	f.mu.Unlock()
	infra := f.runPod(podSpec{name: "web", namespace: "default", annotations: map[string]string{"pool.cpupool.dev": "infra"}})
	ctr, _, err := f.createContainer(infra, "app", 500)
	require.NoError(t, err, "an infra container is not refused for its hugepages")
	assert.NotEmpty(t, f.cpus(ctr))
	_, _, err = f.createContainer(exclusivePod(f, "dpdk"), "fwd", 1000)
	require.ErrorContains(t, err, `hugepage size "3MB" is not a size such as 2MB or 1GB`)
}

// TestHugePagesOfAnAdoptedContainer: a container created just before a
// kill -9, whose record never reached the state file, runs with the mems
// the runtime was told, beyond its CPU's node: Synchronize adopts it with
// its hugepages counted there and its mems as it runs (M2).
func TestHugePagesOfAnAdoptedContainer(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, vmHugePages, statePath(f))
	podFull := exclusivePod(f, "full")
	full, _, err := f.createContainer(podFull, "app", 2000)
	require.NoError(t, err) // node 1's CPUs
	withHugePages(f, 32)
	b, _, err := f.createContainer(exclusivePod(f, "b"), "dpdk", 1000)
	require.NoError(t, err)
	require.Equal(t, "1", f.cpus(b), "node 0's CPU")
	require.Equal(t, "0-1", b.Linux.Resources.Cpu.Mems)

	rp.kill()
	st := rp.savedState(t)
	delete(st.Containers, b.Id)
	require.NoError(t, state.NewFileStore(statePath(f)).Save(st))
	rp = startPlugin(t, f, vmHugePages, statePath(f))
	saved := rp.savedState(t).Containers[b.Id]
	assert.Equal(t, "0-1", saved.Mems, "as it runs")
	assert.Contains(t, saved.Memory, "1:2048kB=32")
	f.removeContainer(full)
	f.removePod(podFull)
	_, _, err = f.createContainer(exclusivePod(f, "c"), "dpdk", 1000)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 32, free node0 0 node1 0", "its pages are counted")
}

// TestNUMAMemoryMetrics: the metrics show each NUMA node's memory and
// hugepages, their reserves, and what the plugin's containers hold: a
// container's pages held on node 1 while it runs, given back when its
// pod ends.
func TestNUMAMemoryMetrics(t *testing.T) {
	f := newFakeRuntime(t, true)
	node := vmHugePages
	node.config += `
memory:
  reservedPerNode: 1Gi
  reservedHugePagesPerNode: {2Mi: 4}
`
	rp := startPlugin(t, f, node, statePath(f))
	withHugePages(f, 16)
	pod := exclusivePod(f, "a")
	a, _, err := f.createContainer(pod, "dpdk", 1000)
	require.NoError(t, err)

	const help = `
# HELP cpupool_numa_memory_bytes Memory of each NUMA node, by state: capacity (MemTotal less the node's hugepage pools, as last read), reserved (memory.reservedPerNode), held (the memory limits of the containers and holds whose memory the plugin pins there) and free (what such a container may still have: capacity less reserved and held).
# TYPE cpupool_numa_memory_bytes gauge
cpupool_numa_memory_bytes{node="0",state="capacity"} 4294967296
cpupool_numa_memory_bytes{node="0",state="free"} 3221225472
cpupool_numa_memory_bytes{node="0",state="held"} 0
cpupool_numa_memory_bytes{node="0",state="reserved"} 1073741824
cpupool_numa_memory_bytes{node="1",state="capacity"} 4227858432
cpupool_numa_memory_bytes{node="1",state="free"} %[3]d
cpupool_numa_memory_bytes{node="1",state="held"} %[1]d
cpupool_numa_memory_bytes{node="1",state="reserved"} 1073741824
# HELP cpupool_numa_hugepages Hugepages of each NUMA node, by size (2Mi, 1Gi) and state: total (nr_hugepages as last read), reserved (memory.reservedHugePagesPerNode), held (the hugepage limits of the containers and holds whose memory the plugin pins there) and free (what such a container may still have: total less reserved and held, and no more than free_hugepages as last read).
# TYPE cpupool_numa_hugepages gauge
cpupool_numa_hugepages{node="0",size="1Gi",state="free"} 0
cpupool_numa_hugepages{node="0",size="1Gi",state="held"} 0
cpupool_numa_hugepages{node="0",size="1Gi",state="reserved"} 0
cpupool_numa_hugepages{node="0",size="1Gi",state="total"} 0
cpupool_numa_hugepages{node="0",size="2Mi",state="free"} 0
cpupool_numa_hugepages{node="0",size="2Mi",state="held"} 0
cpupool_numa_hugepages{node="0",size="2Mi",state="reserved"} 4
cpupool_numa_hugepages{node="0",size="2Mi",state="total"} 0
cpupool_numa_hugepages{node="1",size="1Gi",state="free"} 0
cpupool_numa_hugepages{node="1",size="1Gi",state="held"} 0
cpupool_numa_hugepages{node="1",size="1Gi",state="reserved"} 0
cpupool_numa_hugepages{node="1",size="1Gi",state="total"} 0
cpupool_numa_hugepages{node="1",size="2Mi",state="free"} %[4]d
cpupool_numa_hugepages{node="1",size="2Mi",state="held"} %[2]d
cpupool_numa_hugepages{node="1",size="2Mi",state="reserved"} 4
cpupool_numa_hugepages{node="1",size="2Mi",state="total"} 32
`
	// The state writer publishes the figures after the decisions; a
	// flush makes that now.
	require.NoError(t, rp.p.Flush())
	const node1Free = 4227858432 - 1<<30
	require.NoError(t, testutil.CollectAndCompare(rp.p.metrics, strings.NewReader(fmt.Sprintf(help, 64<<20, 16, node1Free-64<<20, 32-4-16)),
		"cpupool_numa_memory_bytes", "cpupool_numa_hugepages"), "held while it runs")
	// The state file carries the same figures, for status.
	saved := rp.savedState(t).NUMAMemory
	require.Len(t, saved, 2)
	assert.Equal(t, state.NUMAHugePages{Size: "2Mi", Total: 32, Reserved: 4, Held: 16, Free: 12}, saved[1].HugePages[0])
	assert.Equal(t, int64(64<<20), saved[1].Memory.Held)
	require.NotNil(t, saved[1].Memory.Free)
	assert.Equal(t, int64(node1Free-64<<20), *saved[1].Memory.Free)

	f.removeContainer(a)
	f.removePod(pod)
	require.NoError(t, rp.p.Flush())
	require.NoError(t, testutil.CollectAndCompare(rp.p.metrics, strings.NewReader(fmt.Sprintf(help, 0, 0, node1Free, 32-4)),
		"cpupool_numa_memory_bytes", "cpupool_numa_hugepages"), "given back when its pod ended")
}

// TestDamagedMemoryRecordIsDerivedFromTheRuntime: a state file whose
// memory record of a running container is malformed, or names a node the
// container does not run on (another machine's file, an edit), is not
// trusted: the container's memory is derived again from its limits as the
// runtime shows them, on the nodes it runs on, so its pages are never
// counted where they are not and given to another container.
func TestDamagedMemoryRecordIsDerivedFromTheRuntime(t *testing.T) {
	for _, damaged := range []string{"garbage", "1:2048kB=-5", "0:memory=67108864,2048kB=16", "9:memory=67108864,2048kB=16"} {
		t.Run(damaged, func(t *testing.T) {
			f := newFakeRuntime(t, true)
			rp := startPlugin(t, f, vmHugePages, statePath(f))
			withHugePages(f, 16)
			a, _, err := f.createContainer(exclusivePod(f, "a"), "dpdk", 1000)
			require.NoError(t, err)
			_, _, err = f.createContainer(exclusivePod(f, "b"), "dpdk", 1000)
			require.NoError(t, err)

			st := rp.savedState(t) // flushed, then kill -9
			rp.kill()
			c, ok := st.Containers[a.Id]
			require.True(t, ok)
			c.Memory = damaged
			st.Containers[a.Id] = c
			require.NoError(t, state.NewFileStore(statePath(f)).Save(st))
			rp = startPlugin(t, f, vmHugePages, statePath(f))
			_, _, err = f.createContainer(exclusivePod(f, "c"), "dpdk", 1000)
			require.ErrorContains(t, err, "hugepages-2Mi: asked 16, free node0 0 node1 0", "a still holds its pages on node 1")
			assert.Equal(t, "1:memory=67108864,2048kB=16", rp.savedState(t).Containers[a.Id].Memory, "derived again")
		})
	}
}
