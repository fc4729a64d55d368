package plugin

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// stopRuntime takes the fake runtime away as a stopped containerd does:
// its socket gone, its connections cut.
func stopRuntime(f *fakeRuntime) {
	f.r.Stop()
	f.proxy.cut()
	os.Remove(f.runtimeSocket())
}

// behindStaysZero checks cpupool_state_behind_seconds (what
// CpupoolStateBehind fires on) now and a moment later: a decision that
// waited for a write nobody makes grows it from the first scrape on.
func behindStaysZero(t *testing.T, p *Plugin, why string) {
	t.Helper()
	for range 2 {
		assert.Zero(t, gauge(t, p, "cpupool_state_behind_seconds"), why)
		assert.Zero(t, p.writer.behindSince.Load(), why)
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAHotplugWhileTheRuntimeNeverCameLeavesTheStateNotBehind: before the
// first Configure the state is not loaded and its writer not started, so
// a change recorded then would wait for a write nobody makes:
// cpupool_state_behind_seconds would grow for as long as the runtime is
// away and CpupoolStateBehind fire while the disk is well. A CPU going
// offline then changes the pools, and records nothing for the writer:
// before the first Synchronize the allocator holds nobody, and memory is
// the state file's, reconciled with the runtime by Synchronize.
func TestAHotplugWhileTheRuntimeNeverCameLeavesTheStateNotBehind(t *testing.T) {
	f := newFakeRuntime(t, false)
	stopRuntime(f) // the daemon starts before the runtime
	cfg, err := config.Parse(strings.NewReader(desktop.config), "test config")
	require.NoError(t, err)
	cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile = f.sysfsRoot(desktop.fixture), f.cgroupRoot, f.procRoot(), statePath(f)
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	require.NoError(t, err)
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetLevel(logrus.ErrorLevel)
	p, err := New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	require.NoError(t, err)
	fastHotplug(p)
	p.hotplug.uevents = make(chan cpuUevent)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Run(ctx, f.socket, Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		p.Close()
	})
	require.Eventually(t, func() bool {
		err := p.RuntimeReady()
		return err != nil && strings.Contains(err.Error(), RuntimeWaiting)
	}, 5*time.Second, 5*time.Millisecond, "waiting for the runtime")

	setOnlineAt(t, cfg.SysfsRoot, 7, false)
	require.Eventually(t, func() bool { topo, _ := p.Layout(); return !topo.Online.Contains(7) }, 5*time.Second, 5*time.Millisecond,
		"the pools follow CPU 7 going offline")
	behindStaysZero(t, p, "no state to write yet: nothing waits for the writer")

	// The runtime comes: the state is written from its Synchronize on.
	f.start()
	require.Eventually(t, func() bool { return p.RuntimeReady() == nil }, 5*time.Second, 5*time.Millisecond, "synchronized")
	require.NoError(t, p.Flush())
	assert.Zero(t, gauge(t, p, "cpupool_state_behind_seconds"))
	st, err := state.ReadState(cfg.StateFile)
	require.NoError(t, err)
	assert.Equal(t, "4-6,12-15", st.Pools["exclusive"], "the state file has the pools without the offline CPU")
}

// TestAHotplugWhileTheRuntimeIsAwayIsWrittenAtOnce: once the runtime has
// synchronized the plugin, the writer writes whether or not the runtime
// is still there: a CPU that goes offline while it restarts changes the
// state file within moments, and the state is not behind.
func TestAHotplugWhileTheRuntimeIsAwayIsWrittenAtOnce(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPluginTuned(t, f, desktop, statePath(f), fastHotplug)
	stopRuntime(f)
	require.Eventually(t, func() bool { return rp.p.RuntimeReady() != nil }, 5*time.Second, 5*time.Millisecond, "the runtime is away")
	setOnline(t, rp, 7, false)
	waitLayout(t, rp, "4-6,12-15")
	require.Eventually(t, func() bool {
		st, err := state.ReadState(statePath(f))
		return err == nil && st.Pools["exclusive"] == "4-6,12-15"
	}, 5*time.Second, 5*time.Millisecond, "the pools' change is written while the runtime is away")
	require.Eventually(t, func() bool { return rp.p.writer.behindSince.Load() == 0 }, 5*time.Second, 5*time.Millisecond,
		"the state caught up")
	behindStaysZero(t, rp.p, "everything is written")
}
