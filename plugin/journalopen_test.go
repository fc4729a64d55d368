package plugin

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// roRenameFS is the host's file system with a state directory that is
// read-only while readOnly is set: a file cannot be moved aside.
type roRenameFS struct {
	hostfiles.OS
	readOnly *atomic.Bool
}

func (f roRenameFS) Rename(from, to string) error {
	if f.readOnly.Load() {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EROFS}
	}
	return f.OS.Rename(from, to)
}

const damagedJournal = `{"version":1,"records":{`

// startOnReadOnlyDamagedJournal starts a plugin on f with the desktop
// node, a damaged journal (damagedJournal) next to its state file, and a
// state directory that is read-only while readOnly is set (it starts
// set): the journal cannot be moved aside. tune sets the journal's retry
// timing. journal is the journal's path.
func startOnReadOnlyDamagedJournal(t *testing.T, f *fakeRuntime, tune func(*Plugin)) (rp *runningPlugin, journal string, readOnly *atomic.Bool) {
	t.Helper()
	stateFile := statePath(f)
	require.NoError(t, os.MkdirAll(filepath.Dir(stateFile), 0o700))
	journal = hostfiles.JournalPath(stateFile)
	require.NoError(t, os.WriteFile(journal, []byte(damagedJournal), 0o600))
	readOnly = new(atomic.Bool)
	readOnly.Store(true)
	rp = startPlugin(t, f, desktop, stateFile, func(p *Plugin) {
		p.isolationFS = roRenameFS{readOnly: readOnly}
		tune(p)
	})
	return rp, journal, readOnly
}

// TestDamagedJournalOnReadOnlyDiskStillPins: a node with no
// tuning feature configured, a damaged host-originals.json (a crash of an
// older build, a full disk) on a state directory that became read-only.
// The journal cannot be moved aside; before, loadState returned that
// error and Synchronize failed at every connect: no container was pinned.
// Now pinning goes on, isolation is degraded (/readyz's isolation check,
// the metrics), and the journal is left as it is.
func TestDamagedJournalOnReadOnlyDiskStillPins(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp, journal, _ := startOnReadOnlyDamagedJournal(t, f, func(p *Plugin) {
		p.isolationTiming.BackoffInitial = time.Hour // no retry within the test
	})
	pod := f.runPod(podSpec{name: "a", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	assert.NotEmpty(t, f.cpus(ctr), "pinned")

	require.Error(t, rp.p.IsolationReady())
	assert.Contains(t, rp.p.IsolationReady().Error(), "could not be moved aside")
	assert.Nil(t, rp.p.isolation.Load(), "no reconciler: no host file is changed without its original recorded")
	assert.Equal(t, 1.0, gauge(t, rp.p, "cpupool_host_files_journal_unavailable"))
	kept, err := os.ReadFile(journal)
	require.NoError(t, err)
	assert.Equal(t, damagedJournal, string(kept), "left as it is")
	assert.Contains(t, rp.log.String(), "containers are pinned, but no host file is changed or restored")
}

// TestJournalOpenIsRetriedInTheBackground: once the state directory is
// writable again, the journal is opened (the damaged one moved aside)
// without waiting for a reconnect, and isolation is back.
func TestJournalOpenIsRetriedInTheBackground(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp, journal, readOnly := startOnReadOnlyDamagedJournal(t, f, func(p *Plugin) {
		p.isolationTiming.BackoffInitial, p.isolationTiming.BackoffMax = 5*time.Millisecond, 20*time.Millisecond
	})
	require.Error(t, rp.p.IsolationReady())
	readOnly.Store(false)
	require.Eventually(t, func() bool { return rp.p.IsolationReady() == nil && rp.p.isolation.Load() != nil },
		10*time.Second, 10*time.Millisecond, "the journal is opened again in the background")
	aside, _ := filepath.Glob(journal + ".corrupt-*")
	require.Len(t, aside, 1, "the damaged journal is moved aside once it can be")
	assert.Equal(t, 0.0, gauge(t, rp.p, "cpupool_host_files_journal_unavailable"))
	mfs, err := rp.p.Registry().Gather()
	require.NoError(t, err)
	failures, _ := metricValue(mfs, "cpupool_host_files_journal_open_failures_total")
	assert.GreaterOrEqual(t, failures, 1.0)
}
