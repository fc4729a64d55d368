package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// rawSandboxCPUs reads a sandbox's cgroup as it is now, without waiting for
// the plugin's pins.
func (f *fakeRuntime) rawSandboxCPUs(pod *api.PodSandbox) string {
	f.t.Helper()
	dir, err := cgroupDir(pod.Linux.CgroupsPath)
	require.NoError(f.t, err)
	b, err := os.ReadFile(filepath.Join(f.hierarchy(), dir, "cpuset.cpus"))
	require.NoError(f.t, err)
	return strings.TrimSpace(string(b))
}

// TestSandboxPinsOffTheReplyPath: RunPodSandbox and a CreateContainer that
// shrinks infra reply while the sandbox pinner is stuck in a cgroup write,
// and once it is free the sandbox ends on the newest infra, not on the one
// the stuck round took.
func TestSandboxPinsOffTheReplyPath(t *testing.T) {
	f := newFakeRuntime(t, false)
	gate, entered := make(chan struct{}), make(chan struct{}, 8)
	startPluginWith(t, f, desktop, statePath(f), func(rp *runningPlugin) {
		rp.p.pins.hold = func() {
			entered <- struct{}{}
			<-gate
		}
	})
	released := false
	release := func() {
		if !released {
			close(gate)
			released = true
		}
	}
	t.Cleanup(release)

	replied := make(chan *api.PodSandbox)
	go func() { replied <- f.runPod(podSpec{name: "web", qos: "burstable"}) }()
	var web *api.PodSandbox
	select {
	case web = <-replied:
	case <-time.After(10 * time.Second):
		t.Fatal("RunPodSandbox waited for the sandbox's cgroup write")
	}
	<-entered // the pinner took web with infra 0-1,8-9 and is stuck
	assert.Equal(t, "", f.rawSandboxCPUs(web), "not pinned yet")

	dpdk := f.runPod(podSpec{name: "dpdk", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	eni, _, err := f.createContainer(dpdk, "eni", 1000)
	require.NoError(t, err, "CreateContainer replied while the pinner is stuck")
	assert.Equal(t, "1", f.cpus(eni), "lent from infra")
	assert.Equal(t, "", f.rawSandboxCPUs(web), "still not pinned: the pinner is stuck")

	release()
	assert.Equal(t, "0,8-9", f.sandboxCPUs(web), "the last round pins the newest infra")
	assert.Equal(t, "0,8-9", f.sandboxCPUs(dpdk))
}

// TestSandboxPinFailureIsLoggedAndLeavesOthersPinned: a sandbox whose
// cgroup cannot be written is logged, the round goes on with the other
// sandboxes, and the next round (here the next infra change) pins it once
// it can be written.
func TestSandboxPinFailureIsLoggedAndLeavesOthersPinned(t *testing.T) {
	f := newFakeRuntime(t, false)
	var broken string
	rp := startPluginWith(t, f, desktop, statePath(f), func(rp *runningPlugin) {
		rp.p.pins.hold = func() {
			if broken != "" { // a cpuset.cpus that is a directory cannot be written
				os.Remove(broken)
				os.Mkdir(broken, 0o755)
				broken = ""
			}
		}
	})
	web := f.runPod(podSpec{name: "app", qos: "burstable"}) // pinned before eni: ids sort by name
	require.Equal(t, "0-1,8-9", f.sandboxCPUs(web))
	dir, err := cgroupDir(web.Linux.CgroupsPath)
	require.NoError(t, err)
	cpus := filepath.Join(f.hierarchy(), dir, "cpuset.cpus")
	broken = cpus

	// Infra shrinks: every sandbox is due, web's write fails.
	eni := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	c, _, err := f.createContainer(eni, "c", 1000)
	require.NoError(t, err, "the reply does not depend on the sandboxes' cgroups")
	assert.Equal(t, "0,8-9", f.sandboxCPUs(eni), "the other sandbox is pinned")
	assert.Contains(t, rp.log.String(), "pod default/app: pinning sandbox to infra 0,8-9")

	// The fault clears; infra grows back and web is pinned again.
	require.NoError(t, os.Remove(cpus))
	require.NoError(t, os.WriteFile(cpus, nil, 0o644))
	f.stopContainer(c)
	f.removeContainer(c)
	f.removePod(eni)
	assert.Equal(t, "0-1,8-9", f.sandboxCPUs(web))
}

// TestSandboxMemsAreTheNearestNodeWithMemory: on a node whose NUMA node 1
// has CPUs but no memory (has_memory without it, as a CPU-only node or a
// sub-NUMA cluster without DIMMs shows), the kernel refuses a cpuset.mems
// naming node 1 (EINVAL: not in the root cpuset's mems, N_MEMORY). A
// sandbox on infra CPUs of node 1 gets the nearest node with memory, 0, as
// the containers' mems do (docs/configuration.md), not its CPUs' node.
func TestSandboxMemsAreTheNearestNodeWithMemory(t *testing.T) {
	root := t.TempDir()
	spec, err := fixture.ParseSpec("memless", []byte("sockets: 2\ncoresPerSocket: 4\nthreadsPerCore: 1\nnumbering: linear\n"))
	require.NoError(t, err)
	require.NoError(t, spec.Write(root))
	require.NoError(t, os.WriteFile(filepath.Join(root, "sys/devices/system/node/has_memory"), []byte("0\n"), 0o644))
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	require.Len(t, topo.NUMANodes, 2)
	require.False(t, topo.NUMANodes[1].HasMemory, "fixture: node 1 must be memory-less")
	cfg := config.Default()
	cfg.PinMemory = true
	p := &Plugin{cfg: cfg, topo: topo}
	infraOnNode1 := topo.NUMANodes[1].CPUs
	mems := p.infraMems(infraOnNode1)
	assert.Equal(t, "0", mems.String(), "sandbox mems for infra CPUs %s of memory-less node 1", infraOnNode1)
	assert.Equal(t, "0", p.infraMems(topo.NUMANodes[0].CPUs.Union(infraOnNode1)).String(), "infra on both nodes")

	cfg.PinMemory = false
	assert.True(t, p.infraMems(infraOnNode1).IsEmpty(), "memory not pinned: no mems")
}
