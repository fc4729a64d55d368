package plugin

// Putting the host back for good (`nri-cpupool restore-host`): the daemon
// stopping restores nothing, by design (its containers keep running, and
// the next process decides; closeIsolation), so once it is stopped for
// good (a package's removal, an operator taking the node off) something
// must give the host files the journal records their originals back. That
// is a daemon that starts with every feature off and no container: the
// same Sources, journal and reconciler, whose release puts each original
// back exactly as a restart with the features turned off does (identity
// checks of reused IRQs, restore order, irqbalance told to forget the
// plugin's banned CPUs).

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/config/nodecheck"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// RestoredFile is one journal record RestoreHost took care of.
type RestoredFile struct {
	Path  string `json:"path"`
	Owner string `json:"owner"`
	// Original is the value the journal recorded, now written back.
	Original string `json:"original"`
	// Outcome is "restored" (the file holds its original again), "gone"
	// (the file no longer exists: nothing to put back), "dropped" (the
	// file reads another value: it now belongs to another object, an IRQ
	// number the kernel gave to another device, whose own value stays),
	// or "widened" (a cgroup's empty cpuset.cpus, which the kernel does
	// not write back while the cgroup has tasks: it holds its parent's
	// CPUs, which the empty list gave it, and its record stays in the
	// journal, so that a later restore-host, once the cgroup has no
	// tasks, or the plugin's next confinement knows the empty original;
	// hostfiles.ErrNearest).
	Outcome string `json:"outcome"`
}

// LeftFile is a journal record RestoreHost could not restore; it stays in
// the journal.
type LeftFile struct {
	Path     string `json:"path"`
	Owner    string `json:"owner"`
	Original string `json:"original"`
	Reason   string `json:"reason"`
}

// HostRestore is what RestoreHost did.
type HostRestore struct {
	Journal  string         `json:"journal"`
	Restored []RestoredFile `json:"restored"`
	Left     []LeftFile     `json:"left"`
}

// restorePasses bounds the passes RestoreHost makes: a restore may need
// a second (power's preference, read once its governor is back), and a
// transient error (EBUSY) another.
const restorePasses = 5

// restoreRetry is the first wait after a pass with a transient error,
// doubled after each (at most 1.5 s in all).
const restoreRetry = 100 * time.Millisecond

// RestoreHost puts back every original the journal beside cfg.StateFile
// records, as the daemon does for files nothing wants any more, and
// leaves the journal without the records it restored. The caller holds
// the state directory's lock (no daemon runs). Only cfg's roots, state
// file and irqbalance settings are used: every feature is taken as off,
// whatever cfg says, so that nothing is wanted.
func RestoreHost(cfg *config.Config, log *logrus.Logger) (*HostRestore, error) {
	off := config.Default()
	off.StateFile, off.ProcRoot, off.SysfsRoot, off.CgroupRoot = cfg.StateFile, cfg.ProcRoot, cfg.SysfsRoot, cfg.CgroupRoot
	off.IRQ = cfg.IRQ // irqbalance: told to forget the CPUs the plugin banned
	off.KeepHostOffIsolcpus = false
	topo, err := sysfs.Discover(off.SysfsRoot)
	if err != nil {
		return nil, fmt.Errorf("reading the CPU topology under %s: %w", off.SysfsRoot, err)
	}
	layout, problems := nodecheck.Check(topo, off)
	if problems.HasErrors() {
		return nil, problems.Errors().In("the built-in defaults with every feature off")
	}
	p := &Plugin{topo: topo, log: log, cfg: off, cgroups: map[string]partitionCgroup{},
		isolationTiming: hostfiles.DefaultTiming, isolationFS: hostFilesFS(off)}
	p.seesHostThreads = housekeeping.SeesHostThreads(off.ProcRoot)
	p.alloc = allocator.New(topo, layout, false)
	// A reconciler never started: it makes only the passes below, and
	// the journal is read between them (a started one would rescan on its
	// own goroutine meanwhile, once the first Flush made it ready).
	iso, err := p.buildIsolation()
	if err != nil {
		return nil, err
	}
	defer iso.recon.Close()
	res := &HostRestore{Journal: iso.journal.Path(), Restored: []RestoredFile{}, Left: []LeftFile{}}
	before := iso.journal.Records()
	var passErr error
	wait := restoreRetry
	passes := 0 // the passes made, for a left record's reason
	for i := range restorePasses {
		n := iso.journal.Len()
		if n == 0 {
			break
		}
		if passErr != nil && i > 0 {
			time.Sleep(wait) // a transient error (EBUSY, the journal's disk): as the daemon, back off
			wait *= 2
		}
		passErr = iso.recon.Flush()
		passes++
		if passErr == nil && iso.journal.Len() == n {
			break // what is left is refused, not pending
		}
	}
	held := func(path string) string { return heldReason(iso, path) }
	res.Restored, res.Left = sortRestores(iso.fs, held, before, iso.journal.Records(), iso.recon.Status(), passErr, passes)
	return res, nil
}

// sortRestores sorts the journal's records before the passes into those
// taken care of (dropped by the passes, or holding the nearest value the
// kernel takes, whose record stays: st.Nearest) and those left (in after,
// with why: the kernel's refusal, a Source's hold (held, may be nil), the
// pass's error, or the passes made).
func sortRestores(fsys hostfiles.FS, held func(path string) string, before, after map[string]hostfiles.Record, st hostfiles.Status, passErr error, passes int) ([]RestoredFile, []LeftFile) {
	restored, left := []RestoredFile{}, []LeftFile{}
	nearest := map[string]bool{}
	for _, path := range st.Nearest {
		nearest[path] = true
	}
	for _, path := range slices.Sorted(maps.Keys(before)) {
		rec := before[path]
		if _, kept := after[path]; !kept {
			restored = append(restored, RestoredFile{Path: path, Owner: rec.Owner, Original: rec.Original, Outcome: restoredOutcome(fsys, path, rec)})
		}
	}
	reasons := map[string]string{}
	for _, f := range st.Failures {
		reasons[f.Path] = f.Error
		if f.Hint != "" {
			reasons[f.Path] += " (" + f.Hint + ")"
		}
	}
	for _, path := range slices.Sorted(maps.Keys(after)) {
		rec := after[path]
		if nearest[path] {
			// Done as far as the kernel lets it, not left: the record
			// stays for its original's sake (hostfiles.ErrNearest).
			restored = append(restored, RestoredFile{Path: path, Owner: rec.Owner, Original: rec.Original, Outcome: "widened"})
			continue
		}
		why := reasons[path]
		if why == "" && held != nil {
			why = held(path)
		}
		if why == "" && passErr != nil {
			why = passErr.Error()
		}
		if why == "" {
			why = fmt.Sprintf("not restored in %d passes", passes)
			if passes == 1 {
				why = "not restored in 1 pass"
			}
		}
		left = append(left, LeftFile{Path: path, Owner: rec.Owner, Original: rec.Original, Reason: why})
	}
	return restored, left
}

// heldReason is why a Source holds a record at its file's current value
// rather than restoring it ("" when none does): power's preference under
// the performance governor, which the driver refuses to change (EBUSY)
// and which no pass of restore-host takes away (it is the node's, an
// admin's or tuned's now). Without it the record would read as merely
// slow ("not restored in N passes"), with nothing for the operator to do.
func heldReason(iso *isolation, path string) string {
	if iso.power == nil {
		return ""
	}
	if why := iso.power.Held(path); why != "" {
		return "held: " + why + "; switch the governor away from performance (then back, if wanted) and run restore-host again"
	}
	return ""
}

// restoredOutcome tells what became of a record the pass dropped.
func restoredOutcome(fsys hostfiles.FS, path string, rec hostfiles.Record) string {
	data, err := fsys.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "gone"
	case err == nil && strings.TrimSpace(string(data)) != strings.TrimSpace(rec.Original):
		return "dropped"
	}
	return "restored"
}
