package plugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeviceLocalityIsRemembered: a device's NUMA node is read from sysfs
// once; later creations that name it (by annotation, or as a device node
// the runtime gives the container) are placed by what was found, without
// sysfs I/O under the lock. A device that did not exist is looked up again.
func TestDeviceLocalityIsRemembered(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, testNode{fixture: "xeon-2s-interleaved", config: ""}, statePath(f))
	sysfsRoot := rp.p.cfg.SysfsRoot
	create := func(name string, ann map[string]string, devices ...*api.LinuxDevice) (*api.CreateContainerResponse, error) {
		pod := f.runPod(podSpec{name: name, annotations: ann})
		ctr := &api.Container{Id: "ctr-" + name, PodSandboxId: pod.Id, Name: "c",
			Linux: &api.LinuxContainer{Devices: devices, Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2048)}}}}
		return f.r.CreateContainer(t.Context(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	}
	nic := map[string]string{"pool.cpupool.dev": "exclusive", "device.cpupool.dev": "/sys/class/net/ens801f0"}
	gpu := &api.LinuxDevice{Path: "/dev/dri/renderD128", Type: "c", Major: 226, Minor: 128}
	excl := map[string]string{"pool.cpupool.dev": "exclusive"}

	resp, err := create("nic-1", nic)
	require.NoError(t, err)
	assert.Equal(t, "1", resp.Adjust.Linux.Resources.Cpu.Mems, "the NIC is on node 1")
	resp, err = create("gpu-1", excl, gpu)
	require.NoError(t, err)
	assert.Equal(t, "0", resp.Adjust.Linux.Resources.Cpu.Mems, "the GPU is on node 0")

	// sysfs loses both devices' locality: what was found stays.
	require.NoError(t, os.RemoveAll(filepath.Join(sysfsRoot, "sys/class/net/ens801f0")))
	require.NoError(t, os.RemoveAll(filepath.Join(sysfsRoot, "sys/dev/char/226:128")))
	resp, err = create("nic-2", nic)
	require.NoError(t, err, "resolved from memory")
	assert.Equal(t, "1", resp.Adjust.Linux.Resources.Cpu.Mems)
	resp, err = create("gpu-2", excl, gpu)
	require.NoError(t, err)
	assert.Equal(t, "0", resp.Adjust.Linux.Resources.Cpu.Mems, "resolved from memory")

	// A device that is missing is not remembered as missing.
	late := map[string]string{"pool.cpupool.dev": "exclusive", "device.cpupool.dev": "/sys/class/net/late0"}
	_, err = create("late-1", late)
	require.Error(t, err, "no such device yet")
	require.NoError(t, os.Symlink("../../devices/pci0000:00/0000:af:00.0/net/ens801f0", filepath.Join(sysfsRoot, "sys/class/net/late0")))
	resp, err = create("late-2", late)
	require.NoError(t, err, "found once it exists")
	assert.Equal(t, "1", resp.Adjust.Linux.Resources.Cpu.Mems)
}

// TestLocalityCacheExpiresAndIsBounded: an entry is resolved again after
// localityCacheTTL, failures are not kept, and the cache never holds more
// than maxLocalityCache entries whatever paths tenants name.
func TestLocalityCacheExpiresAndIsBounded(t *testing.T) {
	c := localityCache{}
	calls := 0
	resolve := func(node int, err error) func() (int, error) {
		return func() (int, error) { calls++; return node, err }
	}
	n, err := c.numa("a", resolve(1, nil))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	n, _ = c.numa("a", resolve(7, nil))
	assert.Equal(t, 1, n, "remembered")
	assert.Equal(t, 1, calls)

	c["a"] = cachedNUMA{node: 1, at: time.Now().Add(-localityCacheTTL - time.Second)}
	n, _ = c.numa("a", resolve(0, nil))
	assert.Equal(t, 0, n, "resolved again once expired")
	assert.Equal(t, 2, calls)

	c["a"] = cachedNUMA{node: 1, at: time.Now().Add(-localityCacheTTL - time.Second)}
	_, err = c.numa("a", resolve(0, errors.New("gone")))
	require.Error(t, err)
	assert.NotContains(t, c, "a", "a failure is not kept")

	for i := 0; i < 3*maxLocalityCache; i++ {
		_, err := c.numa(fmt.Sprintf("p%d", i), resolve(0, nil))
		require.NoError(t, err)
		require.LessOrEqual(t, len(c), maxLocalityCache)
	}
}
