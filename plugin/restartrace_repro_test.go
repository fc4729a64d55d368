package plugin

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// gateFS blocks the first ReadFile of one path, once armed, until opened:
// a pass held in its plan (a slow read, systemd, a disk).
type gateFS struct {
	hostfiles.OS
	path    string
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	open    chan struct{}
}

func (g *gateFS) ReadFile(path string) ([]byte, error) {
	g.mu.Lock()
	hold := g.armed && path == g.path
	if hold {
		g.armed = false
	}
	g.mu.Unlock()
	if hold {
		close(g.reached)
		<-g.open
	}
	return g.OS.ReadFile(path)
}

// TestReproConfigureDuringIsolationRestartLosesOriginals: a reload or a
// hotplug closes the reconciler (restartIsolation) while its pass is
// under way; a Configure (the runtime reconnecting) in that window opens
// the journal again, before the closing pass recorded the originals it
// then writes. The new reconciler never learns them: when the pod ends,
// the IRQs keep the plugin's affinities instead of their originals.
// A repro (review rv59a, pre-existing code): it fails on ea68da1.
//
// Without the Configure in that window (reconnect: false) it passes: the
// restart opens the journal after the pass, with its records.
func TestReproConfigureDuringIsolationRestartLosesOriginals(t *testing.T) {
	for _, reconnect := range []bool{false, true} {
		t.Run(fmt.Sprintf("reconnect %v", reconnect), func(t *testing.T) { configureDuringRestart(t, reconnect) })
	}
}

func configureDuringRestart(t *testing.T, reconnect bool) {
	f := irqNode(t)
	gate := &gateFS{path: filepath.Join(f.procRoot(), "irq", "24", "smp_affinity_list"), reached: make(chan struct{}), open: make(chan struct{})}
	rp := startPluginTuned(t, f, isolatedDesktop, statePath(f), func(p *Plugin) {
		p.isolationFS = gate
		p.isolationTiming = hostfiles.Timing{Delay: time.Hour, MinInterval: time.Hour, Rescan: time.Hour, BackoffInitial: time.Hour, BackoffMax: time.Hour}
	})
	require.NoError(t, rp.p.FlushIsolation())
	require.Equal(t, originalAffinities, affinities(t, f))

	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev/pod": "true"}})
	_, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)

	// The old reconciler's pass, held in its plan.
	gate.mu.Lock()
	gate.armed = true
	gate.mu.Unlock()
	old := rp.p.isolation.Load()
	passDone := make(chan error, 1)
	go func() { passDone <- old.recon.FlushKicked() }()
	<-gate.reached
	// A reload/hotplug restarts isolation: it waits for that pass.
	restarted := make(chan struct{})
	go func() { rp.p.restartIsolation(); close(restarted) }()
	require.Eventually(t, func() bool { return rp.p.isolation.Load() == nil }, 5*time.Second, time.Millisecond)
	if reconnect {
		// The runtime reconnects meanwhile.
		_, err = rp.p.Configure(context.Background(), "", "containerd", "v2.1.0")
		require.NoError(t, err)
		require.NotNil(t, rp.p.isolation.Load(), "the Configure opened the journal again")
	}
	close(gate.open)
	require.NoError(t, <-passDone)
	<-restarted
	require.NoError(t, rp.p.FlushIsolation())
	moved := affinities(t, f)
	require.NotEqual(t, originalAffinities, moved, "the IRQs were moved off the container's CPUs")

	f.removePod(telco)
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, originalAffinities, affinities(t, f), "the pod ended: every IRQ gets its original back")
}
