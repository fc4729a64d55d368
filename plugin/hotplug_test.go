package plugin

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/dra"
)

// setOnline flips CPUs of the plugin's sysfs tree as the kernel does: the
// cpu/online mask and each cpuN/online file.
func setOnline(t *testing.T, rp *runningPlugin, cpu int, online bool) {
	t.Helper()
	rp.p.mu.Lock()
	root := rp.p.cfg.SysfsRoot
	rp.p.mu.Unlock()
	setOnlineAt(t, root, cpu, online)
}

// setOnlineAt is setOnline on a sysfs tree that no plugin runs on (one
// that is away, restarting).
func setOnlineAt(t *testing.T, root string, cpu int, online bool) {
	t.Helper()
	dir := filepath.Join(root, "sys/devices/system/cpu")
	read := func(name string) cpuset.CPUSet {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		set, err := cpuset.Parse(string(trimNL(data)))
		require.NoError(t, err)
		return set
	}
	set, present := read("online"), read("present")
	flag := "0"
	if online {
		set, flag = set.Union(cpuset.New(cpu)), "1"
	} else {
		set = set.Difference(cpuset.New(cpu))
	}
	writeSysfs(t, filepath.Join(dir, "online"), set.String())
	writeSysfs(t, filepath.Join(dir, "offline"), present.Difference(set).String())
	writeSysfs(t, filepath.Join(dir, "cpu"+strconv.Itoa(cpu), "online"), flag)
}

// writeSysfs replaces a fake sysfs file as the kernel's reads see it: at
// once. os.WriteFile truncates first, and the hotplug watcher polling
// beside it read an empty online mask now and then: every CPU offline, and
// a reload under way refused ("no CPU is left for infra").
func writeSysfs(t *testing.T, path, value string) {
	t.Helper()
	tmp := path + ".writing"
	require.NoError(t, os.WriteFile(tmp, []byte(value+"\n"), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

func fastHotplug(p *Plugin) { p.hotplug.interval = 10 * time.Millisecond }

func layoutNow(rp *runningPlugin) (exclusive, infra string) {
	_, l := rp.p.Layout()
	return l.Exclusive.String(), l.Infra.String()
}

// waitLayout waits for the exclusive pool to be want, and shows the log if
// it never is. The watcher sees a change within 10 ms here; the margin is
// for a loaded machine under -race (the latency is the VM suite's to
// check).
func waitLayout(t *testing.T, rp *runningPlugin, want string) {
	t.Helper()
	require.Eventually(t, func() bool { ex, _ := layoutNow(rp); return ex == want }, 3*time.Second, 5*time.Millisecond,
		"exclusive %s; log:\n%s", func() string { ex, _ := layoutNow(rp); return ex }(), rp.log.String())
}

// exclusiveSlots is how many exclusive CPUs the DRA driver's slices offer,
// from what the plugin tells it (dra.Pools).
func exclusiveSlots(rp *runningPlugin) int {
	topo, layout := rp.p.Layout()
	n := 0
	for _, g := range dra.Offer(topo, layout, map[string]cpuset.CPUSet{"exclusive": rp.p.Held("exclusive")}) {
		if g.Pool == "exclusive" {
			n += g.Slots
		}
	}
	return n
}

func deviceIDs(rp *runningPlugin) []string {
	var out []string
	for _, d := range rp.p.Devices() {
		out = append(out, d.ID)
	}
	return out
}

func hotplugged(rp *runningPlugin, event string) float64 {
	return testutil.ToFloat64(rp.p.metrics.hotplug.WithLabelValues(event))
}

// TestHotplugFreeCPU: a free exclusive CPU that goes offline leaves its
// pool (the allocator, the device plugin's devices, the slices' layout,
// the state file) within the watcher's interval, and comes back with the
// CPU; an infra CPU that goes offline takes infra's members and sandboxes
// with it, with no container event.
func TestHotplugFreeCPU(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	app, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	require.Equal(t, "0-1,8-9", f.cpus(app))

	setOnline(t, rp, 7, false)
	waitLayout(t, rp, "4-6,12-15")
	assert.NotContains(t, deviceIDs(rp), "7")
	assert.Equal(t, 7, exclusiveSlots(rp), "the DRA slices offer 7 exclusive CPUs")
	topo, _ := rp.p.Layout()
	assert.False(t, topo.Online.Contains(7), "the DRA driver's topology follows")
	assert.Equal(t, "4-6,12-15", rp.savedState(t).Pools["exclusive"])
	assert.Equal(t, 1.0, hotplugged(rp, "offline"))
	assert.Contains(t, rp.log.String(), "CPU 7 went offline: it leaves pool exclusive")
	assert.Equal(t, 0.0, testutil.ToFloat64(rp.p.metrics.offlineHeld))

	setOnline(t, rp, 7, true)
	waitLayout(t, rp, "4-7,12-15")
	assert.Contains(t, deviceIDs(rp), "7")
	assert.Equal(t, 8, exclusiveSlots(rp))
	assert.Contains(t, rp.log.String(), "CPU 7 came online: it joins pool exclusive")

	setOnline(t, rp, 9, false)
	require.Eventually(t, func() bool { return f.cpus(app) == "0-1,8" }, 2*time.Second, 5*time.Millisecond,
		"the infra member follows infra: %s", f.cpus(app))
	assert.Equal(t, "0-1,8", f.sandboxCPUs(web))
	setOnline(t, rp, 9, true)
	require.Eventually(t, func() bool { return f.cpus(app) == "0-1,8-9" }, 2*time.Second, 5*time.Millisecond)
	assert.Equal(t, 2.0, hotplugged(rp, "online"))
}

// TestHotplugHeldCPU: a CPU held by a running exclusive container that goes
// offline is reported and stays the container's: its record keeps it, and
// no other container gets it, offline or back online, while its owner
// lives; once the owner's pod ends it is free again.
func TestHotplugHeldCPU(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))

	setOnline(t, rp, 12, false)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rp.p.metrics.offlineHeld) == 1 }, time.Second, 5*time.Millisecond)
	assert.Contains(t, rp.log.String(), "CPU 12 went offline under container telco/dpdk/fwd")
	assert.Equal(t, "4,12", rp.savedState(t).Containers[fwd.Id].CPUs, "the record stays true: the cpuset the container was given")
	assert.Equal(t, "4,12", f.cpus(fwd), "nothing is sent to the container")
	ex, _ := layoutNow(rp)
	assert.Equal(t, "4-7,13-15", ex)

	other := f.runPod(podSpec{name: "other", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	big, _, err := f.createContainer(other, "big", 6000)
	require.NoError(t, err)
	assert.Equal(t, "5-7,13-15", f.cpus(big))
	_, _, err = f.createContainer(other, "one", 1000)
	require.Error(t, err, "CPU 12 is offline and fwd's")

	// cgroup v1 drops an offline CPU from the cpuset for good; the plugin
	// gives it back when it comes online.
	f.setCPUs(fwd, "4")
	setOnline(t, rp, 12, true)
	waitLayout(t, rp, "4-7,12-15")
	assert.Contains(t, rp.log.String(), "CPU 12 came online: still held by container telco/dpdk/fwd")
	require.Eventually(t, func() bool { return f.cpus(fwd) == "4,12" }, time.Second, 5*time.Millisecond, "fwd runs on %s", f.cpus(fwd))
	assert.Equal(t, 0.0, testutil.ToFloat64(rp.p.metrics.offlineHeld))
	_, _, err = f.createContainer(other, "one", 1000)
	require.Error(t, err, "back online, CPU 12 is still fwd's")

	// Offline again, then its owner ends: the CPU is free, but offline; it
	// is handed out only once it is back.
	setOnline(t, rp, 12, false)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rp.p.metrics.offlineHeld) == 1 }, time.Second, 5*time.Millisecond)
	f.stopContainer(fwd)
	f.removeContainer(fwd)
	f.stopPod(pod)
	f.removePod(pod)
	one, _, err := f.createContainer(other, "one", 1000)
	require.NoError(t, err)
	assert.Equal(t, "4", f.cpus(one), "4 is free; 12 is offline")
	_, _, err = f.createContainer(other, "two", 1000)
	require.Error(t, err)
	setOnline(t, rp, 12, true)
	waitLayout(t, rp, "4-7,12-15")
	two, _, err := f.createContainer(other, "two", 1000)
	require.NoError(t, err)
	assert.Equal(t, "12", f.cpus(two))
}
