package plugin

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestRestartKeepsHeldOfflineCPUs (issue 34): CPUs that a running
// container and the hold of a stopped one keep, and that went offline
// while the plugin was away, stay theirs through the restart: the records
// keep them, nothing moves, they are reported, and no one else gets them,
// offline or back online, while their owners live.
func TestRestartKeepsHeldOfflineCPUs(t *testing.T) {
	f := newFakeRuntime(t, true)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	old := f.runPod(podSpec{name: "old", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	gone, _, err := f.createContainer(old, "gone", 2000)
	require.NoError(t, err)
	require.Equal(t, "5,13", f.cpus(gone))
	f.stopContainer(gone) // its CPUs stay held for its pod
	require.Contains(t, first.savedState(t).Held, "uid-old/gone")
	first.stop()

	// While the plugin is away, the kernel takes a CPU of each offline.
	root := f.sysfsRoot(desktop.fixture)
	setOnlineAt(t, root, 12, false)
	setOnlineAt(t, root, 13, false)

	second := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	st := second.savedState(t)
	require.Contains(t, st.Containers, fwd.Id)
	assert.Equal(t, "4,12", st.Containers[fwd.Id].CPUs, "the record keeps the CPU the kernel took offline")
	require.Contains(t, st.Held, "uid-old/gone", "the hold of the stopped container lives on")
	assert.Equal(t, "5,13", st.Held["uid-old/gone"].CPUs)
	assert.Equal(t, "4,12", f.cpus(fwd), "nothing moved the container")
	for _, u := range f.syncUpdates {
		assert.NotEqual(t, fwd.Id, u.ContainerId, "no update for the container")
	}
	assert.Equal(t, 2.0, testutil.ToFloat64(second.p.metrics.offlineHeld))
	assert.Contains(t, second.log.String(), "CPU 12 of container telco/dpdk/fwd is offline: the kernel took it from its cpuset; it stays its own, and is given to no one else while it lives")
	assert.Contains(t, second.log.String(), "CPU 13 of stopped container telco/old/gone (held for its pod) is offline")
	ex, _ := layoutNow(second)
	assert.Equal(t, "4-7,14-15", ex, "offline CPUs are in no pool")

	other := f.runPod(podSpec{name: "other", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	big, _, err := f.createContainer(other, "big", 4000)
	require.NoError(t, err)
	assert.Equal(t, "6-7,14-15", f.cpus(big))
	_, _, err = f.createContainer(other, "one", 1000)
	require.Error(t, err, "4 and 5 are held online, 12 and 13 held offline")

	// Back online, they are still their owners'.
	setOnline(t, second, 12, true)
	setOnline(t, second, 13, true)
	waitLayout(t, second, "4-7,12-15")
	require.Eventually(t, func() bool { return testutil.ToFloat64(second.p.metrics.offlineHeld) == 0 }, 3*time.Second, 5*time.Millisecond)
	assert.Contains(t, second.log.String(), "CPU 12 came online: still held by container telco/dpdk/fwd")
	assert.Contains(t, second.log.String(), "CPU 13 came online: still held by stopped container telco/old/gone")
	_, _, err = f.createContainer(other, "one", 1000)
	require.Error(t, err, "back online, 12 and 13 are not free")
	assert.Equal(t, "4,12", f.cpus(fwd))

	// Their owners end: the CPUs are free again.
	f.stopContainer(fwd)
	f.removeContainer(fwd)
	f.stopPod(pod)
	f.removePod(pod)
	f.removeContainer(gone)
	f.stopPod(old)
	f.removePod(old)
	one, _, err := f.createContainer(other, "one", 4000)
	require.NoError(t, err)
	assert.Equal(t, "4-5,12-13", f.cpus(one))
}

// TestRestartKeepsHeldOfflineCPUsOnCgroupV1 (issue 34): cgroup v1 drops an
// offline CPU from the container's cpuset for good, so the runtime reports
// the rest; the container is still where it was put, keeps the CPU in its
// record, and gets it back when it comes online.
func TestRestartKeepsHeldOfflineCPUsOnCgroupV1(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	first.stop()
	setOnlineAt(t, f.sysfsRoot(desktop.fixture), 12, false)
	f.setCPUs(fwd, "4")

	second := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	assert.Equal(t, "4,12", second.savedState(t).Containers[fwd.Id].CPUs)
	assert.Equal(t, "4", f.cpus(fwd), "not moved, and not sent an offline CPU")
	assert.Equal(t, 1.0, testutil.ToFloat64(second.p.metrics.offlineHeld))
	setOnline(t, second, 12, true)
	require.Eventually(t, func() bool { return f.cpus(fwd) == "4,12" }, 3*time.Second, 5*time.Millisecond, "fwd runs on %s", f.cpus(fwd))
	other := f.runPod(podSpec{name: "other", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	c, _, err := f.createContainer(other, "c", 6000)
	require.NoError(t, err)
	assert.Equal(t, "5-7,13-15", f.cpus(c), "12 is fwd's")
}

// TestPropertyRestartWithOfflineCPUs (issue 34): in random rounds, a few
// exclusive containers run or stopped (held for their pods), a random set
// of the exclusive pool's CPUs goes offline while the plugin is away, and
// the runtime reports either the cpuset it was given (cgroup v2) or what
// the kernel left of it (v1). After the restart, and after every CPU is
// back online: no container moved, every record and hold keeps its CPUs,
// and no new container ever gets a CPU that one of them owns.
// CPUPOOL_PROPERTY_SEED sets the first seed.
func TestPropertyRestartWithOfflineCPUs(t *testing.T) {
	first := uint64(envInt("CPUPOOL_PROPERTY_SEED", int(time.Now().UnixNano()%1_000_000)))
	rounds := envInt("CPUPOOL_PROPERTY_ROUNDS", 6)
	t.Logf("seeds %d to %d (CPUPOOL_PROPERTY_SEED=%d reproduces)", first, first+uint64(rounds)-1, first)
	for i := range uint64(rounds) {
		seed := first + i
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { restartWithOfflineRound(t, seed) })
	}
}

func restartWithOfflineRound(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 34))
	unified := rng.IntN(2) == 0
	f := newFakeRuntime(t, unified)
	before := startPlugin(t, f, desktop, statePath(f))
	owned := map[int]string{} // CPU -> the container or hold that owns it
	var running []*api.Container
	given := map[string]cpuset.CPUSet{}
	for i := range 1 + rng.IntN(4) {
		pod := f.runPod(podSpec{name: fmt.Sprintf("p%d", i), namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
		ctr, _, err := f.createContainer(pod, "c", int64(1+rng.IntN(2))*1000)
		if err != nil {
			break // the pool is full
		}
		cpus := mustParse(f.cpus(ctr))
		given[ctr.Id] = cpus
		for _, c := range cpus.List() {
			owned[c] = ctr.Id
		}
		if rng.IntN(3) == 0 {
			f.stopContainer(ctr) // its CPUs are held for its pod
			continue
		}
		running = append(running, ctr)
	}
	before.stop()

	root := f.sysfsRoot(desktop.fixture)
	offline := cpuset.New()
	for _, c := range mustParse("4-7,12-15").List() {
		if rng.IntN(3) == 0 {
			setOnlineAt(t, root, c, false)
			offline = offline.Union(cpuset.New(c))
		}
	}
	t.Cleanup(func() {
		for _, c := range offline.List() {
			setOnlineAt(t, root, c, true)
		}
	})
	for _, ctr := range running {
		if left := given[ctr.Id].Difference(offline); !unified && !left.IsEmpty() {
			f.setCPUs(ctr, left.String()) // what cgroup v1 leaves
		}
	}
	reported := map[string]string{}
	for _, ctr := range running {
		reported[ctr.Id] = f.cpus(ctr)
	}

	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug)
	t.Logf("cgroup v2 %v, given %v, running %d, offline %s", unified, given, len(running), offline)
	st := rp.savedState(t)
	heldOffline := 0
	for id, cpus := range given {
		if rec, ok := st.Containers[id]; ok {
			assert.Equal(t, cpus.String(), rec.CPUs, "the record of %s keeps its CPUs", id)
		} else {
			var found bool
			for _, h := range st.Held {
				found = found || h.ContainerID == id && h.CPUs == cpus.String()
			}
			assert.True(t, found, "the hold of stopped %s keeps its CPUs %s: %v", id, cpus, st.Held)
		}
		heldOffline += cpus.Intersection(offline).Size()
	}
	assert.Equal(t, float64(heldOffline), testutil.ToFloat64(rp.p.metrics.offlineHeld))
	for _, ctr := range running {
		assert.Equal(t, reported[ctr.Id], f.cpus(ctr), "container %s not moved", ctr.Id)
	}

	greedy := f.runPod(podSpec{name: "greedy", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	n := 0
	takeAll := func(when string) {
		for {
			ctr, _, err := f.createContainer(greedy, fmt.Sprintf("g%d", n), 1000)
			n++
			if err != nil {
				return
			}
			for _, c := range mustParse(f.cpus(ctr)).List() {
				require.NotContains(t, owned, c, "%s: a new container got CPU %d of %s", when, c, owned[c])
				require.False(t, offline.Contains(c) && when == "offline", "a new container got offline CPU %d", c)
				owned[c] = ctr.Id
			}
		}
	}
	takeAll("offline")
	for _, c := range offline.List() {
		setOnline(t, rp, c, true)
	}
	waitLayout(t, rp, "4-7,12-15")
	takeAll("back online")
	for _, ctr := range running {
		assert.Equal(t, given[ctr.Id].String(), mustParse(f.cpus(ctr)).Union(given[ctr.Id]).String(), "container %s runs within its CPUs", ctr.Id)
	}
}
