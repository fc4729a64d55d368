package plugin

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reloadBeforeSync restarts the plugin of runDesktop (an exclusive
// container on 4,12, a shared one on 2-3,10-11) and, before the runtime's
// first Synchronize, reloads each config in turn, checking that none is
// applied unchecked: each waits, and status says so.
func reloadBeforeSync(t *testing.T, configs ...string) (*fakeRuntime, *runningPlugin, map[string]string) {
	t.Helper()
	f, first, ids := runDesktop(t)
	first.stop()
	second := startPluginWith(t, f, desktop, statePath(f), func(rp *runningPlugin) {
		for _, yaml := range configs {
			err := rp.p.Reload(reloadConfig(t, rp, yaml), nil, "test")
			var re *ReloadError
			require.ErrorAs(t, err, &re, "not applied before the containers are known")
			assert.Equal(t, ReloadPending, re.Result)
			assert.Contains(t, err.Error(), "waits for the runtime's first Synchronize")
			r := lastReload(t, rp)
			assert.Equal(t, ReloadPending, r.Result, "status tells it waits")
			assert.Contains(t, r.Reason, "checked, and applied or refused, right after it")
			assert.Equal(t, 0.0, reloads(rp, ReloadApplied)+reloads(rp, ReloadRefused)+reloads(rp, ReloadInvalid), "counted once decided")
		}
		assert.Equal(t, "4-7,12-15", rp.p.alloc.Layout().Exclusive.String(), "the pools in force are the start's")
	})
	return f, second, ids
}

// TestReloadBeforeTheFirstSynchronizeThatWouldMoveIsRefused: after a
// restart, a reload that comes before the runtime connects is not applied
// unchecked (issue 41, item 3): it waits for the first Synchronize, and is
// then refused, since the remembered exclusive container would run on CPUs
// the new layout gives to shared.
func TestReloadBeforeTheFirstSynchronizeThatWouldMoveIsRefused(t *testing.T) {
	f, rp, ids := reloadBeforeSync(t, desktopShifted)
	waitReloads(t, rp, ReloadRefused, 1)
	assert.Equal(t, 0.0, reloads(rp, ReloadApplied))
	r := lastReload(t, rp)
	assert.Equal(t, ReloadRefused, r.Result)
	assert.Contains(t, r.Reason, "telco/dpdk/fwd (CPUs 4,12)")
	assert.Contains(t, rp.log.String(), "reload (test) refused: telco/dpdk/fwd would move")

	rp.p.mu.Lock()
	exclusive, shared := rp.p.alloc.Layout().Exclusive.String(), rp.p.alloc.Layout().Shared.String()
	rp.p.mu.Unlock()
	assert.Equal(t, "4-7,12-15", exclusive, "the old config stays in force")
	assert.Equal(t, "2-3,10-11", shared)
	assert.Equal(t, "4,12", ctrCPUs(f, ids["fwd"]))
	assert.Equal(t, "2-3,10-11", ctrCPUs(f, ids["logger"]))
	assert.Equal(t, "2-3,10-11", rp.savedState(t).Pools["shared"])
}

// TestReloadBeforeTheFirstSynchronizeThatMovesNobodyIsApplied: a harmless
// reload before the first Synchronize is applied right after it, and the
// shared member follows the grown pool; of two such reloads, the later
// replaces the earlier, so only it is decided.
func TestReloadBeforeTheFirstSynchronizeThatMovesNobodyIsApplied(t *testing.T) {
	f, rp, ids := reloadBeforeSync(t, desktopShifted, desktopGrown)
	waitReloads(t, rp, ReloadApplied, 1)
	assert.Equal(t, 0.0, reloads(rp, ReloadRefused), "the shifted layout was replaced before it was decided")
	assert.Equal(t, ReloadApplied, lastReload(t, rp).Result)
	assert.Contains(t, rp.log.String(), "reload (test), waiting for the runtime's first Synchronize, is replaced by reload (test)")
	require.Eventually(t, func() bool { return ctrCPUs(f, ids["logger"]) == "2-3,7,10-11,15" }, 2*time.Second, 10*time.Millisecond,
		"the shared member follows the grown pool; it runs on %s", ctrCPUs(f, ids["logger"]))
	assert.Equal(t, "4,12", ctrCPUs(f, ids["fwd"]))
	rp.p.mu.Lock()
	defer rp.p.mu.Unlock()
	assert.Equal(t, "4-6,12-14", rp.p.alloc.Layout().Exclusive.String())
}

// TestReloadAppliedRightAfterTheFirstSynchronizeRacesNothingInRun: the
// stub's Start returns once Configure is answered, before the runtime's
// first Synchronize, so Run goes on beside that Synchronize and the queued
// reload it applies. Run must not read the config in force without the
// lock while that reload swaps it: under -race it was a data race (a
// flake of the test above on a loaded machine, where Run was slow to get
// past its log line). The Registered hook, on Run's goroutine right after
// Start, sleeps without synchronizing with anything, so the reload is
// applied before Run goes on and the race detector sees both sides.
func TestReloadAppliedRightAfterTheFirstSynchronizeRacesNothingInRun(t *testing.T) {
	f, first, _ := runDesktop(t)
	first.stop()
	var once sync.Once
	rp := startPluginWith(t, f, desktop, statePath(f), func(rp *runningPlugin) {
		err := rp.p.Reload(reloadConfig(t, rp, desktopGrown), nil, "test")
		var re *ReloadError
		require.ErrorAs(t, err, &re)
		require.Equal(t, ReloadPending, re.Result)
		rp.hooks.Registered = func() { once.Do(func() { time.Sleep(500 * time.Millisecond) }) }
	})
	waitReloads(t, rp, ReloadApplied, 1)
	registered := `registered with the runtime at ` + f.socket + ` as \"10-` + PluginName + `\"`
	require.Eventually(t, func() bool { return strings.Contains(rp.log.String(), registered) }, 3*time.Second, 10*time.Millisecond,
		"Run goes on after the hook and logs its name")
	rp.p.mu.Lock()
	defer rp.p.mu.Unlock()
	assert.Equal(t, "4-6,12-14", rp.p.alloc.Layout().Exclusive.String())
}
