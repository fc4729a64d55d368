package plugin

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/hostfiles"
)

// isolatedPoweredDesktop is poweredDesktop whose exclusive pool keeps its
// CPUs free of IRQs always: a node where a stopped daemon leaves IRQ
// affinities, the default affinity and power settings changed.
var isolatedPoweredDesktop = testNode{fixture: desktop.fixture, config: strings.Replace(poweredDesktop.config,
	`exclusive: {cpus: "4-7,12-15"}`, `exclusive: {cpus: "4-7,12-15", irqIsolation: always}`, 1)}

// TestRestoreHostPutsBackWhatAStoppedDaemonLeft: the daemon's clean stop
// (a package's removal: systemctl disable --now) restores nothing, by
// design; RestoreHost, run afterwards with the node's config, puts every
// original the journal recorded back, exactly, and empties the journal.
// Run again, it has nothing to do.
func TestRestoreHostPutsBackWhatAStoppedDaemonLeft(t *testing.T) {
	f := irqNode(t)
	rp := startPlugin(t, f, isolatedPoweredDesktop, statePath(f), slowPasses)
	require.NoError(t, rp.p.FlushIsolation())
	require.NotEqual(t, originalAffinities, affinities(t, f), "the pool's CPUs are kept free of IRQs")
	requireClass(t, f, cpuset.New(0, 1, 8, 9), saverCPU, "infra saves power")
	rp.stop()
	rp.p.Close()
	require.NotEqual(t, originalAffinities, affinities(t, f), "a clean stop restores nothing")

	cfg, err := config.Parse(strings.NewReader(isolatedPoweredDesktop.config), "test config")
	require.NoError(t, err)
	cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile = f.sysfsRoot(desktop.fixture), f.cgroupRoot, f.procRoot(), statePath(f)
	log := logrus.New()
	log.SetOutput(&strings.Builder{})
	res, err := RestoreHost(cfg, log)
	require.NoError(t, err)
	assert.Empty(t, res.Left)
	owners := map[string]int{}
	for _, r := range res.Restored {
		assert.Equal(t, "restored", r.Outcome, r.Path)
		owners[r.Owner]++
	}
	assert.Positive(t, owners["irq"], "IRQ affinities restored")
	assert.Positive(t, owners["power"], "power files restored")
	assert.Equal(t, originalAffinities, affinities(t, f), "the IRQs as before the install")
	requireClass(t, f, cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), bootedCPU, "every CPU as booted")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Empty(t, records, "the journal is empty")

	again, err := RestoreHost(cfg, log)
	require.NoError(t, err)
	assert.Empty(t, again.Restored, "idempotent")
	assert.Empty(t, again.Left)
}

// TestRestoreHostPutsBackHousekeeping: a daemon that kept host processes
// off both pools always (the top-level cgroups and the workqueue mask
// narrowed), stopped cleanly, leaves them narrowed; RestoreHost gives
// each file its original back and empties the journal.
func TestRestoreHostPutsBackHousekeeping(t *testing.T) {
	f := housekeptNode(t)
	node := testNode{fixture: desktop.fixture, config: strings.NewReplacer(
		"exclusive: {cpus: \"4-7,12-15\", housekeeping: held}", "exclusive: {cpus: \"4-7,12-15\", housekeeping: always}",
		"shared: {cpus: \"2-3,10-11\"}", "shared: {cpus: \"2-3,10-11\", housekeeping: always}").Replace(housekeptDesktop.config)}
	require.Contains(t, node.config, "housekeeping: always}\n  shared")
	rp := startPlugin(t, f, node, statePath(f), slowPasses)
	require.NoError(t, rp.p.FlushIsolation())
	kept := housekeptFor(t, cpuset.New(2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15))
	require.Equal(t, kept, housekeptNow(t, f))
	rp.stop()
	rp.p.Close()
	require.Equal(t, kept, housekeptNow(t, f), "a clean stop restores nothing")

	cfg, err := config.Parse(strings.NewReader(node.config), "test config")
	require.NoError(t, err)
	cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile = f.sysfsRoot(desktop.fixture), f.cgroupRoot, f.procRoot(), statePath(f)
	log := logrus.New()
	log.SetOutput(&strings.Builder{})
	res, err := RestoreHost(cfg, log)
	require.NoError(t, err)
	assert.Empty(t, res.Left)
	assert.NotEmpty(t, res.Restored)
	assert.Equal(t, housekeptFiles, housekeptNow(t, f), "every file as it booted")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), bootID)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestRestoreHostOutcomeOfAWidenedCgroup: a top-level cgroup whose empty
// cpuset.cpus the kernel would not write back while it has tasks holds
// the root's CPUs after the restore, and its record stays in the journal
// (hostfiles.ErrNearest, Status.Nearest): reported as widened, not left
// (restore-host exits 0), nor as a file that belongs to something else.
func TestRestoreHostOutcomeOfAWidenedCgroup(t *testing.T) {
	dir := t.TempDir()
	cpus := filepath.Join(dir, "system", "cpuset.cpus")
	require.NoError(t, os.MkdirAll(filepath.Dir(cpus), 0o755))
	require.NoError(t, os.WriteFile(cpus, []byte("0-6\n"), 0o644))
	refused := filepath.Join(dir, "irq", "smp_affinity_list")
	rec := hostfiles.Record{Owner: "housekeeping", Original: ""}
	irq := hostfiles.Record{Owner: "irq", Original: "3"}
	before := map[string]hostfiles.Record{cpus: rec, refused: irq}
	st := hostfiles.Status{Nearest: []string{cpus}, Failures: []hostfiles.Failure{{Path: refused, Error: "EIO"}}}
	restored, left := sortRestores(hostfiles.OS{}, nil, before, before, st, nil, 1)
	assert.Equal(t, []RestoredFile{{Path: cpus, Owner: "housekeeping", Original: "", Outcome: "widened"}}, restored)
	assert.Equal(t, []LeftFile{{Path: refused, Owner: "irq", Original: "3", Reason: "EIO"}}, left)

	assert.Equal(t, "restored", restoredOutcome(hostfiles.OS{}, cpus, hostfiles.Record{Owner: "housekeeping", Original: "0-6"}))
	assert.Equal(t, "dropped", restoredOutcome(hostfiles.OS{}, cpus, irq))
}

// TestRestoreHostMakesNoPassInTheBackground: RestoreHost makes its
// passes (Flush) on its own goroutine and reads the journal (Len,
// Records) between them, which only a pass may touch: its reconciler
// must make no pass of its own meanwhile. A started one would, as the
// first Flush makes it ready: its rescan (irq.rescanInterval, 1 s at
// least) passes too. A restore that fails for now (a transient error:
// here EISDIR, as EBUSY) backs off 100, 200, 400 then 800 ms, and such a
// rescan at 1 s would restore what has become writable and swap the
// records under the Len read before the last backoff: reported under
// -race.
func TestRestoreHostMakesNoPassInTheBackground(t *testing.T) {
	f := irqNode(t)
	node := testNode{fixture: desktop.fixture, config: strings.Replace(isolatedDesktop.config, "irqIsolation: optIn", "irqIsolation: always", 1)}
	rp := startPlugin(t, f, node, statePath(f), slowPasses)
	require.NoError(t, rp.p.FlushIsolation())
	require.NotEqual(t, "0-15", affinities(t, f)["24"], "IRQ 24 moved off the pool")
	rp.stop()
	rp.p.Close()

	// IRQ 24's file cannot be written for now.
	irq24 := filepath.Join(f.procRoot(), "irq/24/smp_affinity_list")
	moved, err := os.ReadFile(irq24)
	require.NoError(t, err)
	require.NoError(t, os.Remove(irq24))
	require.NoError(t, os.Mkdir(irq24, 0o755))
	go func() {
		time.Sleep(850 * time.Millisecond) // during the last backoff, before the rescan
		os.Remove(irq24)
		os.WriteFile(irq24, moved, 0o644)
	}()
	cfg, err := config.Parse(strings.NewReader(node.config), "test config")
	require.NoError(t, err)
	cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile = f.sysfsRoot(desktop.fixture), f.cgroupRoot, f.procRoot(), statePath(f)
	cfg.IRQ.RescanInterval = config.Duration{Duration: time.Second}
	log := logrus.New()
	log.SetOutput(io.Discard)
	res, err := RestoreHost(cfg, log)
	require.NoError(t, err)
	assert.Equal(t, "0-15", affinities(t, f)["24"], "restored by the last pass")
	assert.Contains(t, res.Restored, RestoredFile{Path: irq24, Owner: "irq", Original: "0-15", Outcome: "restored"})
	assert.Empty(t, res.Left)
}
