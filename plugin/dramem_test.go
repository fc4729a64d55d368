package plugin

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/numamem"
)

// vmHugePagesDRA is the 2-node VM with 32 pages of 2 MiB on node 1 only,
// with the DRA driver on.
var vmHugePagesDRA = testNode{fixture: vmHugePages.fixture, config: vmHugePages.config + "dra: {enabled: true}\n"}

// prepareHugePages prepares a claim for cpus CPUs and pages 2 MiB pages of
// the exclusive pool's device on a NUMA node.
func (n *draNode) prepareHugePages(t *testing.T, uid string, numa, cpus int, pages int64, pod *api.PodSandbox) ([]string, error) {
	t.Helper()
	claim := n.claim(uid, numa, cpus, pod)
	if pages > 0 {
		claim.Status.Allocation.Devices.Results[0].ConsumedCapacity["cpupool.dev/hugepages2Mi"] = *resource.NewQuantity(pages<<21, resource.BinarySI)
	}
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	if res[claim.UID].Err != nil {
		return nil, res[claim.UID].Err
	}
	return n.cdiEnv(t, uid), nil
}

func (n *draNode) memoryUse() []numamem.NodeMemoryUse {
	n.p.mu.Lock()
	defer n.p.mu.Unlock()
	return n.p.alloc.MemoryUse()
}

// pagesOn1 is node 1 holding n pages and the memory limits of ctrs
// containers (withHugePages: 64 MiB each).
func pagesOn1(n int64, ctrs int64) []numamem.NodeMemoryUse {
	return []numamem.NodeMemoryUse{{Node: 1, Memory: ctrs << 26, HugePages: map[int64]int64{2048: n}}}
}

// A claim's hugepages are the claim's from Prepare to Unprepare: another
// claim's container cannot take them; the container bound to the claim
// takes them from the reservation, counted once, across a kill -9 and
// Synchronize; Unprepare gives them back, and nothing goes negative.
func TestDRAClaimReservesItsHugePages(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRAOn(t, f, vmHugePagesDRA)
	podA := f.runPod(podSpec{name: "a", namespace: "telco", qos: "besteffort"})
	podB := f.runPod(podSpec{name: "b", namespace: "telco", qos: "besteffort"})
	envA, err := n.prepareHugePages(t, "uid-a", 1, 1, 16, podA)
	require.NoError(t, err)
	envB, err := n.prepareHugePages(t, "uid-b", 1, 1, 0, podB) // CPUs only
	require.NoError(t, err)
	assert.Equal(t, pagesOn1(16, 0), n.memoryUse(), "reserved at Prepare")

	// B's container asks for more than the reservation leaves.
	withHugePages(f, 24)
	_, _, err = f.createWithEnv(podB, "app", 10, envB...)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 24, free node1 16")

	// A's container takes the claim's pages: counted once.
	withHugePages(f, 16)
	a, resp, err := f.createWithEnv(podA, "fwd", 10, envA...)
	require.NoError(t, err)
	assert.Equal(t, "1", resp.Adjust.Linux.Resources.Cpu.Mems)
	assert.Equal(t, pagesOn1(16, 1), n.memoryUse(), "the bound container's pages are its claim's")
	// So B's container fits in the other 16.
	_, _, err = f.createWithEnv(podB, "app", 10, envB...)
	require.NoError(t, err)
	assert.Equal(t, pagesOn1(32, 2), n.memoryUse())

	// kill -9 once the state file knows the containers (so that they are
	// restored as known, not adopted): the claims file and the runtime
	// give back the same count.
	require.NoError(t, n.p.Flush())
	n.kill()
	n = startDRAOn(t, f, vmHugePagesDRA)
	assert.Equal(t, pagesOn1(32, 2), n.memoryUse(), "after a restart")
	n.p.mu.Lock()
	res := n.p.alloc.ClaimReservations()["uid-a/cpus"]
	n.p.mu.Unlock()
	assert.Equal(t, podA.Uid, res.PodUID)

	// A's container ends: its pages stay the claim's until Unprepare.
	f.stopContainer(a)
	f.removeContainer(a)
	assert.Equal(t, 32, int(n.memoryUse()[0].HugePages[2048]))
	out, err := n.driver.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: types.UID("uid-a")}})
	require.NoError(t, err)
	require.NoError(t, out["uid-a"])
	assert.Equal(t, pagesOn1(16, 1), n.memoryUse(), "B's container's only")
	for _, u := range n.memoryUse() {
		for _, c := range u.HugePages {
			assert.GreaterOrEqual(t, c, int64(0))
		}
		assert.GreaterOrEqual(t, u.Memory, int64(0))
	}
}

// A Prepare reads the hugepages again: pages a process the plugin does not
// know took since are not given to the claim.
func TestDRAPrepareReadsTheHugePagesLive(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRAOn(t, f, vmHugePagesDRA)
	pod := f.runPod(podSpec{name: "a", namespace: "telco", qos: "besteffort"})
	setFreeHugePages(t, f, "10")
	_, err := n.prepareHugePages(t, "uid-a", 1, 1, 16, pod)
	require.ErrorContains(t, err, "hugepages-2Mi: asked 16, free node1 10")
	assert.Empty(t, n.memoryUse())
	setFreeHugePages(t, f, "32")
	_, err = n.prepareHugePages(t, "uid-a", 1, 1, 16, pod)
	require.NoError(t, err)
	assert.Equal(t, pagesOn1(16, 0), n.memoryUse())
}

// vmBothPoolsDRA is the 2-node VM with the exclusive pool on CPU 3 alone
// and exclusive-non-isolcpus lending infra's CPUs 1-2: node 1 (CPUs 2-3,
// the 32 pages of 2 MiB) has a device of each pool, and its memory is on
// the exclusive pool's.
var vmBothPoolsDRA = testNode{fixture: vmHugePages.fixture, config: `
isolatedCPUs: "3"
reservedCPUs: "0"
pools:
  exclusive: {cpus: "3"}
  exclusive-non-isolcpus: {enabled: true}
dra: {enabled: true}
`}

// memoryDevice names the device of the driver's offer that carries a
// node's memory, "" for none.
func (n *draNode) memoryDevice(node int) string {
	for _, g := range n.driver.Offer() {
		if g.NUMA == node && g.Memory != nil {
			return dra.GroupName(g.Pool, g.NUMA)
		}
	}
	return ""
}

// TestDRANodeMemoryStaysOnItsDevice is issue 41, item 10: a claim holds 16
// pages of node 1, allocated on the exclusive pool's device there. The
// pool's one CPU on node 1 goes offline: the device leaves the offer, and
// the node's memory must not move to the exclusive-non-isolcpus device of
// the node, whose capacity the scheduler has not charged the claim's
// pages to (it would allocate them twice). It is not offered while the
// claim holds some; once the claim is unprepared it goes where the rule
// puts it, and stays there while a claim holds some of it, also when the
// exclusive pool's CPU comes back.
func TestDRANodeMemoryStaysOnItsDevice(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := &draNode{f: f, cdi: filepath.Join(f.dir, "cdi")}
	n.runningPlugin = startPluginWith(t, f, vmBothPoolsDRA, statePath(f), func(rp *runningPlugin) {
		d, err := dra.New(rp.p, dra.Options{NodeName: "node-a", ClaimsFile: dra.ClaimsFile(statePath(f)), CDIDir: n.cdi, Log: rp.p.log})
		require.NoError(t, err)
		rp.p.UseClaims(d)
		n.driver = d
		fastHotplug(rp.p)
	})
	ex, _ := layoutNow(n.runningPlugin)
	require.Equal(t, "3", ex)
	require.Equal(t, "exclusive-numa1", n.memoryDevice(1))
	pod := f.runPod(podSpec{name: "a", namespace: "telco", qos: "besteffort"})
	_, err := n.prepareHugePages(t, "uid-a", 1, 1, 16, pod)
	require.NoError(t, err)

	setOnline(t, n.runningPlugin, 3, false)
	waitLayout(t, n.runningPlugin, "")
	assert.Equal(t, "", n.memoryDevice(1), "node 1's memory stays with the claim's device, which has no CPU online")
	for _, dev := range n.driver.Resources().Pools["node-a"].Slices[0].Devices {
		if dev.Name == "exclusive-non-isolcpus-numa1" {
			assert.NotContains(t, dev.Capacity, resourceapi.QualifiedName(dra.CapacityMemory), "the slices say so")
		}
	}
	assert.Equal(t, "exclusive-non-isolcpus-numa0", n.memoryDevice(0), "node 0 (no exclusive CPU): where it was")

	out, err := n.driver.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: types.UID("uid-a")}})
	require.NoError(t, err)
	require.NoError(t, out["uid-a"])
	assert.Equal(t, "exclusive-non-isolcpus-numa1", n.memoryDevice(1), "no claim holds any: the rule's device")

	// A claim of that device takes some; the exclusive CPU comes back.
	claim := n.claim("uid-b", 1, 1, pod)
	claim.Status.Allocation.Devices.Results[0].Device = dra.GroupName("exclusive-non-isolcpus", 1)
	claim.Status.Allocation.Devices.Results[0].ConsumedCapacity["cpupool.dev/hugepages2Mi"] = *resource.NewQuantity(8<<21, resource.BinarySI)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)
	setOnline(t, n.runningPlugin, 3, true)
	waitLayout(t, n.runningPlugin, "3")
	assert.Equal(t, "exclusive-non-isolcpus-numa1", n.memoryDevice(1), "it stays while a claim holds some")
}

// TestDRAReserveMemoryReadsTheTopologyUnderTheLock: the DRA driver's
// ReserveMemory (Prepare of a claim with hugepages) lists the nodes with
// memory from the plugin's topology, which a CPU going offline replaces
// under the lock (applyHotplug). The hotplug is applied first, then the
// reservation comes with nothing that orders it after the swap (the test
// only sleeps): an unlocked read of p.topo is reported under -race.
func TestDRAReserveMemoryReadsTheTopologyUnderTheLock(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRAOn(t, f, vmHugePagesDRA)
	// startDRAOn takes no option: the watcher ticks every HotplugInterval.
	setOnline(t, n.runningPlugin, 3, false)
	// The watcher reads the mask every HotplugInterval and swaps p.topo;
	// wait without synchronizing with it.
	time.Sleep(3 * HotplugInterval)
	_, err := n.p.ReserveMemory(numamem.ClaimMemory{Key: "uid-race/cpus",
		Held: []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: 2048, Count: 1}}}}}, true)
	require.NoError(t, err)
	ex, _ := layoutNow(n.runningPlugin)
	require.Equal(t, "1-2", ex, "the hotplug was applied")
}
