package power

import (
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/hostfiles"
)

// Source is the hostfiles.Source of power classes. Its owner keeps the
// CPUs' classes in memory; each pass asks for them (Want) and plans the
// files.
type Source struct {
	node    *Node
	classes map[string]config.PowerClass
	want    func() map[int]string
	journal *hostfiles.Journal
	log     *logrus.Logger

	// files keeps what describes the node's drivers between passes,
	// read anew at each rescan (nodefiles.go). Only the reconciler's
	// goroutine uses it.
	files *nodeFiles

	mu sync.Mutex // guards what follows: Report runs on scrapes
	// warned are the notes already logged.
	warned map[string]bool
	report Report
}

var (
	_ hostfiles.Source         = (*Source)(nil)
	_ hostfiles.Explainer      = (*Source)(nil)
	_ hostfiles.Rescanner      = (*Source)(nil)
	_ hostfiles.HoldBackScoper = (*Source)(nil)
)

// Report is what the last pass planned, for the metrics.
type Report struct {
	// CPUs are each class's CPUs.
	CPUs map[string]cpuset.CPUSet
	// Files are the files the pass wanted, with their class.
	Files map[string]string
	// Unsupported are the settings left out.
	Unsupported []Note
	// Held are the files the journal keeps an original of that no pass
	// restores for now, and why, by path: a preference under the
	// performance governor, which the driver refuses to change. They are
	// restored once the cause goes (the governor leaves performance).
	Held map[string]string
}

// NewSource returns the Source of the classes; want returns every CPU's
// class (CPUs without one are left out), and is called on the
// reconciler's goroutine at each pass. The journal is the reconciler's:
// Plan reads it (on that goroutine, within the pass) to know which files
// the pass restores before it writes.
func NewSource(node *Node, classes map[string]config.PowerClass, want func() map[int]string, journal *hostfiles.Journal, log *logrus.Logger) *Source {
	return &Source{node: node, classes: classes, want: want, journal: journal, log: log, warned: map[string]bool{}, files: newNodeFiles()}
}

// Rescan forgets what the Source kept of the node's driver files: the
// rescan's pass reads them anew (hostfiles.Rescanner).
func (s *Source) Rescan() { s.files = newNodeFiles() }

// Warned marks notes as logged already (Node.Check's warnings at start):
// a pass logs only what they did not say.
func (s *Source) Warned(notes []Note) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range notes {
		s.warned[n.key()] = true
	}
}

// Owner names the Source in the journal.
func (s *Source) Owner() string { return Owner }

// Plan lists the files of every CPU's class. A CPU whose class is not
// (any more) in the config is left as the node has it, and said so.
func (s *Source) Plan() (hostfiles.Plan, error) {
	want := s.want()
	ns := newNotes()
	pl := newPlanner(s.node, ns)
	pl.files = s.files
	if s.journal != nil {
		pl.original = func(path string) (string, bool) {
			rec, ok := s.journal.Get(path)
			return rec.Original, ok && rec.Owner == Owner
		}
	}
	pl.classOf = func(cpu int) (string, bool) {
		class, ok := want[cpu]
		if _, known := s.classes[class]; !ok || !known {
			return "", false
		}
		return class, true
	}
	byClass := map[string][]int{}
	for _, cpu := range slices.Sorted(maps.Keys(want)) {
		class := want[cpu]
		pc, ok := s.classes[class]
		if !ok {
			ns.add(class, "class", "no such class in power.classes (remembered from another configuration); left as the node has it", cpu)
			continue
		}
		byClass[class] = append(byClass[class], cpu)
		pl.cpu(cpu, class, pc)
	}
	if s.journal != nil {
		for path, rec := range s.journal.Records() {
			if rec.Owner == Owner {
				pl.restoredDie(path)
				pl.restoredPreference(path, rec.Original)
			}
		}
	}
	pl.uncore()
	report := Report{CPUs: map[string]cpuset.CPUSet{}, Files: map[string]string{}, Unsupported: ns.list()}
	for class, cpus := range byClass {
		report.CPUs[class] = cpuset.New(cpus...)
	}
	for path, c := range pl.claims {
		if c.class != "" { // "": a bound held for a pass, no class's
			report.Files[path] = c.class
		}
	}
	report.Held = pl.held
	var fresh []Note
	var freshHeld []string
	s.mu.Lock()
	s.report = report
	for _, n := range report.Unsupported {
		if !s.warned[n.key()] {
			s.warned[n.key()] = true
			fresh = append(fresh, n)
		}
	}
	for key := range s.warned {
		// A hold that ended is said again if it comes back.
		if path, ok := strings.CutPrefix(key, heldKey); ok && pl.held[path] == "" {
			delete(s.warned, key)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(pl.held)) {
		if !s.warned[heldKey+path] {
			s.warned[heldKey+path] = true
			freshHeld = append(freshHeld, path)
		}
	}
	s.mu.Unlock()
	for _, n := range fresh {
		s.log.Warnf("power: %s; the CPUs run without it", n)
	}
	for _, path := range freshHeld {
		orig := ""
		if rec, ok := s.journal.Get(path); ok {
			orig = rec.Original
		}
		s.log.Warnf("power: %s is not restored to its original %q for now (the journal keeps it): %s; it is restored once the governor leaves performance", path, orig, pl.held[path])
	}
	return hostfiles.Plan{Changes: pl.changes(), Pending: pl.pending}, nil
}

// heldKey prefixes the keys of warned that are held files' paths.
const heldKey = "held\x00"

// Held says why the journal's record of path is held at the file's
// current value rather than restored, as of the last pass ("": it is
// not). restore-host gives it as the reason a record is left.
func (s *Source) Held(path string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.report.Held[path]
}

// HoldBackScope is the directory of a file (hostfiles.HoldBackScoper):
// the power files wait for one another only within it, a cpufreq
// policy's governor, frequencies and preference, an uncore die's bounds.
// A restore that fails for now (an offline CPU's inactive policy answers
// EBUSY) holds back no other CPU's or die's restores.
func (s *Source) HoldBackScope(path string) string { return filepath.Dir(path) }

// Report returns what the last pass planned.
func (s *Source) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.report
}

// Explain hints at the cause of a permanent refusal.
func (s *Source) Explain(path string, err error) string {
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case errno == syscall.EROFS:
		return "/sys is read-only here: a systemd unit with ProtectKernelTunables= needs ReadWritePaths=/sys/devices/system/cpu"
	case errno == syscall.EINVAL && strings.Contains(path, "intel_uncore_frequency"):
		return "the uncore driver rejects this frequency for this die"
	case errno == syscall.EINVAL:
		return "the driver rejects this value for this CPU"
	case errno == syscall.EACCES || errno == syscall.EPERM:
		return "not permitted: the plugin must run as root"
	}
	return ""
}
