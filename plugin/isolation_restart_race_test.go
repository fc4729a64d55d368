package plugin

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/irq"
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

// TestIsolationRestartKeepsOriginalsOfItsLastPass: a reload or a hotplug
// closes the reconciler (restartIsolation) while its pass is under way,
// and the runtime reconnects (Configure, then Synchronize) meanwhile. The
// originals that last pass records are in the journal the next
// reconciler reads, stay in the file at its later writes, and are put
// back exactly when the pod ends; a Synchronize in that window leads to a
// pass of the next reconciler, unasked.
//
// Before, a Configure in that window opened the journal before the
// pass recorded the originals of the IRQs it then moved; the next
// reconciler never restored them (IRQs 0, 24, 27 kept 0-3,5-11,13-15 /
// 5-7,13-15, the default affinity efef), and its next journal write
// replaced the originals on disk by those values.
func TestIsolationRestartKeepsOriginalsOfItsLastPass(t *testing.T) {
	for _, tc := range []struct {
		name string
		// configure, synchronize: the runtime reconnects while the
		// reconciler closes (Synchronize: with no pod running).
		configure, synchronize bool
	}{
		{name: "no reconnect"},
		{name: "configure", configure: true},
		{name: "configure and synchronize", configure: true, synchronize: true},
	} {
		t.Run(tc.name, func(t *testing.T) { restartDuringPass(t, tc.configure, tc.synchronize) })
	}
}

func restartDuringPass(t *testing.T, configure, synchronize bool) {
	f := irqNode(t)
	gate := &gateFS{path: filepath.Join(f.procRoot(), "irq", "24", "smp_affinity_list"), reached: make(chan struct{}), open: make(chan struct{})}
	node := isolatedDesktop
	node.config += "irq: {rescanInterval: 1h}\n" // no rescan does the work of a missing kick
	rp := startPluginTuned(t, f, node, statePath(f), func(p *Plugin) {
		p.isolationFS = gate
		p.isolationTiming = hostfiles.Timing{Delay: time.Hour, MinInterval: time.Hour, Rescan: time.Hour, BackoffInitial: time.Hour, BackoffMax: time.Hour}
	})
	// A failure below must not leave the pass held: the plugin's stop
	// waits for it (run before it, registered after it).
	var opened sync.Once
	openGate := func() { opened.Do(func() { close(gate.open) }) }
	t.Cleanup(openGate)
	require.NoError(t, rp.p.FlushIsolation())
	require.Equal(t, originalAffinities, affinities(t, f))

	telco := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev/pod": "true"}})
	_, _, err := f.createContainer(telco, "fwd", 2000)
	require.NoError(t, err)

	// The next reconciler passes soon after a kick: only a kick makes it
	// pass (no flush below while the synchronized state waits).
	rp.p.mu.Lock()
	rp.p.isolationTiming = hostfiles.Timing{Delay: time.Millisecond, MinInterval: time.Millisecond, Rescan: time.Hour,
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
	rp.p.mu.Unlock()

	// The old reconciler's pass, held in its plan.
	gate.mu.Lock()
	gate.armed = true
	gate.mu.Unlock()
	old := rp.p.isolation.Load()
	writesBefore := old.recon.Status().Writes
	passDone := make(chan error, 1)
	go func() { passDone <- old.recon.FlushKicked() }()
	<-gate.reached
	// A reload/hotplug restarts isolation: it waits for that pass.
	restarted := make(chan struct{})
	go func() { rp.p.restartIsolation(); close(restarted) }()
	require.Eventually(t, func() bool { return rp.p.isolation.Load() == nil }, 5*time.Second, time.Millisecond)
	if configure {
		// The runtime reconnects meanwhile.
		_, err = rp.p.Configure(context.Background(), "", "containerd", "v2.1.0")
		require.NoError(t, err)
	}
	if synchronize {
		// ... and says that no pod runs any more.
		_, err = rp.p.Synchronize(context.Background(), nil, nil)
		require.NoError(t, err)
	}
	// Nobody opens the journal while the closing pass may still record
	// in it: the restart opens the next reconciler, the only one.
	require.Nil(t, rp.p.isolation.Load(), "a reconciler was opened while the old one closes")
	openGate()
	require.NoError(t, <-passDone)
	<-restarted
	require.Greater(t, old.recon.Status().Writes, writesBefore, "the closing pass moved IRQs: the test shows nothing otherwise")
	next := rp.p.isolation.Load()
	require.NotNil(t, next, "the restart opened the next reconciler")
	require.NotSame(t, old, next)

	if synchronize {
		// Nothing flushes: the Synchronize's kick, or the restart's, must
		// lead to the next reconciler's pass, which puts everything back.
		assert.Eventually(t, func() bool {
			records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
			return err == nil && len(records) == 0 && assert.ObjectsAreEqual(originalAffinities, affinities(t, f))
		}, 10*time.Second, 5*time.Millisecond, "no pod runs: every IRQ gets its original back, unasked, and the journal empties")
		assert.Equal(t, originalAffinities, affinities(t, f))
		return
	}

	// The originals the closing pass recorded.
	irqDir := filepath.Join(f.procRoot(), "irq")
	want := map[string]string{
		filepath.Join(irqDir, "0", "smp_affinity_list"):  "0-15",
		filepath.Join(irqDir, "24", "smp_affinity_list"): "0-15",
		filepath.Join(irqDir, "27", "smp_affinity_list"): "4-7,12-15",
		filepath.Join(irqDir, "default_smp_affinity"):    "ffff",
	}
	originals := func(records map[string]hostfiles.Record) map[string]string {
		out := map[string]string{}
		for p, r := range records {
			out[p] = r.Original
		}
		return out
	}
	require.NoError(t, rp.p.FlushIsolation())
	moved := affinities(t, f)
	require.NotEqual(t, originalAffinities, moved, "the IRQs were moved off the container's CPUs")
	assert.Equal(t, len(want), next.recon.Status().Records[irq.Owner], "the next reconciler knows the originals its predecessor's last pass recorded")

	// A second pod makes the next reconciler write its journal: the
	// originals stay those of before the plugin, also for a kill -9.
	two := f.runPod(podSpec{name: "two", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "irq-isolation.cpupool.dev/pod": "true"}})
	_, _, err = f.createContainer(two, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	got := originals(records)
	for p, o := range want {
		assert.Equal(t, o, got[p], "the journal file keeps the original of %s", p)
	}

	f.removePod(telco)
	f.removePod(two)
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, originalAffinities, affinities(t, f), "the pods ended: every IRQ gets its original back")
	records, _, _, err = hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Empty(t, records, "every original is back: no record left")
}
