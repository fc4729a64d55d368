package plugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAContainerStartedAcrossSynchronizeIsPinnedInItsCgroup: a container
// created while no plugin was registered has its task, and its cgroup,
// created from its unpinned spec, and is still "created" when Synchronize
// lists it. The runtime applies Synchronize's update to its spec only (as
// containerd does for a container that is not running), so the plugin pins
// its cgroup itself once it is there.
func TestAContainerStartedAcrossSynchronizeIsPinnedInItsCgroup(t *testing.T) {
	for _, unified := range []bool{false, true} {
		t.Run(map[bool]string{false: "cgroup v1", true: "cgroup v2"}[unified], func(t *testing.T) {
			f := newFakeRuntime(t, unified)
			web := f.runPod(podSpec{name: "web", qos: "burstable"})
			// No plugin: the runtime creates it as its spec says.
			ctr, _, err := f.createContainer(web, "app", 500)
			require.NoError(t, err)
			f.mu.Lock()
			ctr.State = api.ContainerState_CONTAINER_CREATED
			f.mu.Unlock()
			cpusFile := filepath.Join(f.hierarchy(), ctr.Linux.CgroupsPath, "cpuset.cpus")

			rp := startPlugin(t, f, xeon, statePath(f))
			infra := rp.p.alloc.Layout().Infra.String()
			require.Equal(t, infra, f.cpus(ctr), "Synchronize's update reached the spec")

			// The task comes after Synchronize, from the old spec.
			f.mkCgroup(ctr.Linux.CgroupsPath)
			require.NoError(t, os.WriteFile(cpusFile, []byte("0-79\n"), 0o644))
			waitForFile(t, cpusFile, infra)
			// Counted and logged just after the write the file shows.
			assert.Eventually(t, func() bool {
				return testutil.ToFloat64(rp.p.metrics.startRepins) == 1 &&
					strings.Contains(rp.log.String(), "container default/web/app started on CPUs")
			}, 5*time.Second, 5*time.Millisecond, "repins counted: %v; log: %s", testutil.ToFloat64(rp.p.metrics.startRepins), rp.log.String())
		})
	}
}

func TestCreatedWithUpdatesPicksCreatedContainersWhoseCPUsChange(t *testing.T) {
	ctr := func(id string, state api.ContainerState, path string) *api.Container {
		return &api.Container{Id: id, State: state, Linux: &api.LinuxContainer{CgroupsPath: path}}
	}
	update := func(id, cpus string) *api.ContainerUpdate {
		u := &api.ContainerUpdate{}
		u.SetContainerId(id)
		if cpus != "" {
			u.SetLinuxCPUSetCPUs(cpus)
		} else {
			u.SetLinuxCPUQuota(-1)
		}
		return u
	}
	got := createdWithUpdates([]*api.Container{
		ctr("created", api.ContainerState_CONTAINER_CREATED, "/a/created"),
		ctr("running", api.ContainerState_CONTAINER_RUNNING, "/a/running"),
		ctr("untouched", api.ContainerState_CONTAINER_CREATED, "/a/untouched"),
		ctr("quota-only", api.ContainerState_CONTAINER_CREATED, "/a/quota"),
		ctr("no-path", api.ContainerState_CONTAINER_CREATED, ""),
	}, []*api.ContainerUpdate{update("created", "1"), update("running", "1"), update("quota-only", ""), update("no-path", "1")})
	require.Len(t, got, 1)
	assert.Equal(t, startCheck{id: "created", cgroupsPath: "/a/created"}, *got[0])
}

// TestAContainerListedOnlyAfterSynchronizeIsAdoptedAtItsStart: CRI-O lists
// a new container only after its CreateContainer hook, so one created
// while no plugin was registered can miss the plugin's Synchronize; its
// start is the first the plugin hears of it.
func TestAContainerListedOnlyAfterSynchronizeIsAdoptedAtItsStart(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, xeon, statePath(f))
	infra := rp.p.alloc.Layout().Infra.String()
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	late := &api.Container{Id: "ctr-web-late", PodSandboxId: web.Id, Name: "late", State: api.ContainerState_CONTAINER_RUNNING,
		Linux: &api.LinuxContainer{CgroupsPath: web.Linux.CgroupParent + "/ctr-web-late",
			Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(512), Period: api.UInt64(100000)}}}}
	f.mu.Lock()
	f.ctrs[late.Id] = late
	f.mu.Unlock()
	f.mkCgroup(late.Linux.CgroupsPath)
	cpusFile := filepath.Join(f.hierarchy(), late.Linux.CgroupsPath, "cpuset.cpus")
	require.NoError(t, os.WriteFile(cpusFile, []byte("0-79\n"), 0o644))

	require.NoError(t, f.r.PostStartContainer(context.Background(), &api.PostStartContainerRequest{Pod: web, Container: late}))
	waitForFile(t, cpusFile, infra)
	assert.Contains(t, rp.log.String(), "container default/web/late started without the plugin seeing its creation")
	assert.Contains(t, rp.savedState(t).Containers, late.Id, "remembered")

	// The runtime's own view follows with the next reply.
	_, _, err := f.createContainer(web, "next", 500)
	require.NoError(t, err)
	assert.Equal(t, infra, f.cpus(late))

	// A second start event (a repeat) changes nothing.
	require.NoError(t, f.r.PostStartContainer(context.Background(), &api.PostStartContainerRequest{Pod: web, Container: late}))
	assert.Equal(t, 1, strings.Count(rp.log.String(), "started without the plugin seeing its creation"))
}

// waitForFile waits until a file says want (the background pinner's
// write), or fails after 10 s.
func waitForFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.TrimSpace(string(b)) == want {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s still says %q, not %q", path, b, want)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAStartEventAfterItsContainerStoppedAdoptsNothing: a container that
// exits at once may have its stop handled before its start's post event
// arrives; adopting it then would give a dead container the CPUs its pod
// holds (containerd 2.0 did this in the end-to-end suite).
func TestAStartEventAfterItsContainerStoppedAdoptsNothing(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, xeon, statePath(f))
	crash := f.runPod(podSpec{name: "crash", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(crash, "app", 1000)
	require.NoError(t, err)
	f.stopContainer(ctr)
	require.NoError(t, f.r.PostStartContainer(context.Background(), &api.PostStartContainerRequest{Pod: crash, Container: ctr}))
	assert.NotContains(t, rp.log.String(), "started without the plugin seeing its creation")
	rp.p.mu.Lock()
	_, running := rp.p.alloc.Get(ctr.Id)
	holds := len(rp.p.alloc.HoldsOf(crash.Uid))
	rp.p.mu.Unlock()
	assert.False(t, running, "the stopped container is not running again")
	assert.Equal(t, 1, holds, "its CPU stays held for its pod")

	// Removed without a stop first: the same.
	gone, _, err := f.createContainer(crash, "other", 1000)
	require.NoError(t, err)
	f.removeContainer(gone)
	require.NoError(t, f.r.PostStartContainer(context.Background(), &api.PostStartContainerRequest{Pod: crash, Container: gone}))
	assert.NotContains(t, rp.log.String(), "started without the plugin seeing its creation")
}

func TestEndedRunsKeepsTheLastOnes(t *testing.T) {
	var e endedRuns
	for i := range endedRunsKept + 10 {
		e.add(fmt.Sprint(i))
	}
	assert.False(t, e.has("0"), "the oldest are forgotten")
	assert.False(t, e.has("9"))
	assert.True(t, e.has("10"))
	assert.True(t, e.has(fmt.Sprint(endedRunsKept+9)))
	assert.Len(t, e.ids, endedRunsKept)
	e.add("10") // again: nothing moves
	assert.True(t, e.has("11"))
}
