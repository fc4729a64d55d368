package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every CPU of the shared pool went offline while the plugin was away (or
// before its state write caught up): Synchronize's readd moves the members
// to infra, as a hotplug seen live does (Rebase). Left on their offline
// CPUs, the kernel would run them on the parent's CPUs, exclusive ones
// included.
func TestRestartWithSharedPoolOfflineRunsMembersOnInfra(t *testing.T) {
	f := newFakeRuntime(t, true)
	first := startPlugin(t, f, desktopCounted, statePath(f))
	require.Equal(t, "2,10", sharedNow(first))
	pod := f.runPod(podSpec{name: "web", annotations: map[string]string{"pool.cpupool.dev/pod": "shared"}})
	web, _, err := f.createContainer(pod, "app", 500)
	require.NoError(t, err)
	require.Equal(t, "2,10", f.cpus(web))
	first.stop()
	root := f.sysfsRoot(desktopCounted.fixture)
	setOnlineAt(t, root, 2, false)
	setOnlineAt(t, root, 10, false)

	second := startPlugin(t, f, desktopCounted, statePath(f), fastHotplug)
	require.Equal(t, "", sharedNow(second))
	second.p.mu.Lock()
	infra := second.p.alloc.PoolCPUs("infra")
	a, _ := second.p.alloc.Get(web.Id)
	second.p.mu.Unlock()
	require.False(t, infra.IsEmpty())
	assert.Equal(t, infra.String(), a.Cpuset().String(), "record after restart")
	assert.Equal(t, infra.String(), f.cpus(web), "runtime after restart: the shared member is pinned to offline CPUs only")
}

// Relayout readmits members with readd: while every CPU of the shared pool
// is offline a shared member must not block a reload (it did, with a
// reason that blamed the config: "pool shared has no CPUs as now
// configured").
func TestReloadWhileSharedPoolOffline(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopCounted, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "web", annotations: map[string]string{"pool.cpupool.dev/pod": "shared"}})
	_, _, err := f.createContainer(pod, "app", 500)
	require.NoError(t, err)
	setOnline(t, rp, 2, false)
	setOnline(t, rp, 10, false)
	require.Eventually(t, func() bool { return sharedNow(rp) == "" }, 3*time.Second, 5*time.Millisecond)
	// Same pools; only who may use exclusive changes.
	grown := strings.Replace(desktopCounted.config, "exclusive: [telco]", "exclusive: [telco, dpdk]", 1)
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, grown), nil, "test"), "a reload that changes no pool")
}

// A shared container that restarts (the kubelet's restart of a crashed
// member, a new attempt of the same pod) while every CPU of the shared pool
// is offline runs on infra, as its running siblings do (MembersCPUs): it
// was refused, and its pod crash-looped until a CPU came back.
func TestSharedMemberRestartsWhileItsPoolIsOffline(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktopCounted, statePath(f), fastHotplug)
	pod := f.runPod(podSpec{name: "web", annotations: map[string]string{"pool.cpupool.dev/pod": "shared"}})
	web, _, err := f.createContainer(pod, "app", 500)
	require.NoError(t, err)
	setOnline(t, rp, 2, false)
	setOnline(t, rp, 10, false)
	require.Eventually(t, func() bool { return sharedNow(rp) == "" }, 3*time.Second, 5*time.Millisecond)
	f.exitContainer(web, 137)
	f.removeContainer(web)
	again, _, err := f.createAttempt(pod, "app", 1, 500)
	require.NoError(t, err, "restart of a shared member while its pool is offline")
	rp.p.mu.Lock()
	infra := rp.p.alloc.PoolCPUs("infra")
	rp.p.mu.Unlock()
	assert.Equal(t, infra.String(), f.cpus(again))
}
