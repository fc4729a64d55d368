package housekeeping

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// Owner is the Source's name in the journal of original values.
const Owner = "housekeeping"

// Config is where the Source writes and what it asks at each pass.
type Config struct {
	SysfsRoot, CgroupRoot, ProcRoot string
	Online                          cpuset.CPUSet
	// DomainIsolated are the CPUs isolcpus= took out of the scheduler's
	// domains: host processes never ran there (PID 1's affinity leaves them
	// out, and every process inherits it). A cpuset change resets the
	// affinity of a cgroup's tasks to its CPUs, so the cgroups and units
	// get the housekeeping set without them, or the confinement would move
	// host processes onto isolated CPUs (seen in the VM suite).
	DomainIsolated cpuset.CPUSet
	// Floor is the fewest CPUs the set may have
	// (pools.exclusive-non-isolcpus.minInfraCPUs).
	Floor int
	// Kept is asked at each pass (on the reconciler's goroutine): the CPUs
	// to keep host processes off. Nothing kept: every file is restored.
	Kept func() Kept
	// Systemd, when set, is systemd's D-Bus API (SystemdFS, the
	// reconciler's FS): where systemd manages the cgroups, the host's
	// units get AllowedCPUs= through it. Without it they are left alone,
	// and the log says so.
	Systemd interface{ Reachable() error }
	// PodCgroups, when set, is asked at each pass for the top-level
	// cgroups the runtime's pods are in ("kubepods", or what a kubelet's
	// --cgroup-root names), left alone like kubepods.slice and kubepods:
	// confining them would confine the exclusive containers below them to
	// the host's CPUs.
	PodCgroups func() []string
	// LeaveWorkqueueMask leaves the global unbound workqueue mask to
	// another owner (kernelWork.workqueues, when no pool has housekeeping
	// and only the pools' isolcpus= CPUs are kept here: the kernel keeps
	// them out of that mask itself). Two owners of one file would fight.
	LeaveWorkqueueMask bool
	// WorkqueueAlsoOff, when set, is asked at each pass for CPUs the
	// global unbound workqueue mask leaves out besides those the
	// housekeeping set does: kernelWork.workqueues' held CPUs, also those
	// of a pool without housekeeping, whose mask this Source owns while a
	// pool has housekeeping (one owner per file).
	WorkqueueAlsoOff func() cpuset.CPUSet
	// Recorded are the journal's records when this process started
	// (hostfiles.Journal.Records): the thread affinities an earlier
	// process of this boot left confined say that host threads were
	// confined before this process's first pass, and since when the
	// threads it did not record were its own choice (threads.go).
	Recorded map[string]hostfiles.Record
	// ThreadAffinity says that the reconciler's FS serves AffinityRoot
	// (AffinityFS): the unbound kernel threads, and on cgroup v1 the
	// host's user-space threads, are then confined by their affinity
	// (threads.go). Without it they are left alone, and the log says so.
	ThreadAffinity bool
}

// Source is the hostfiles.Source of housekeeping confinement.
type Source struct {
	cfg Config
	log *logrus.Logger

	// warned holds the last warning of each topic, so each is logged once
	// while it stays the same.
	warned *hostfiles.Warnings

	// unreachable counts the passes systemd's API could not be reached.
	unreachable atomic.Uint64

	mu   sync.Mutex // guards last: Plan runs on the reconciler's goroutine, the readers anywhere
	last cpuset.CPUSet

	// prevHost is the set the previous pass gave host processes, which a
	// thread forked since inherited (empty when that pass confined
	// nothing); seen are the thread affinities that pass planned;
	// planned tells whether a pass ran (threads.go). Only Plan uses them,
	// on the reconciler's goroutine.
	prevHost cpuset.CPUSet
	seen     map[string]bool
	planned  bool
	// resumed says that an earlier process left host threads confined
	// (Config.Recorded); lookedAfter is the latest start time of a thread
	// it recorded: it last planned after that tick, so a thread started
	// by then that it did not record was not confined by inheritance.
	resumed     bool
	lookedAfter uint64
	// resetting says that the previous pass confined the host's
	// user-space threads on cgroup v2, whose cgroups' cpusets a release
	// resets: the release pass gives them their originals back right
	// after (threadChanges' release). unitsHost is the set the previous
	// pass gave systemd's units.
	resetting bool
	unitsHost cpuset.CPUSet
}

var (
	_ hostfiles.Source  = (*Source)(nil)
	_ hostfiles.Claimer = (*Source)(nil)
)

// NewSource returns the Source.
func NewSource(cfg Config, log *logrus.Logger) *Source {
	s := &Source{cfg: cfg, log: log, warned: hostfiles.NewWarnings(log), last: cfg.Online, prevHost: cpuset.New()}
	for path, rec := range cfg.Recorded {
		if _, start, ok := AffinityThread(path); ok && rec.Owner == Owner {
			s.resumed, s.lookedAfter = true, max(s.lookedAfter, start)
		}
	}
	return s
}

// Owner names the Source in the journal.
func (s *Source) Owner() string { return Owner }

// Claims implements hostfiles.Claimer: the global unbound workqueue mask,
// unless it is another owner's (LeaveWorkqueueMask), may have been
// recorded by kernelWork.workqueues before a pool had housekeeping; a
// pass in which this Source fails to plan leaves it as it is. Its other
// files only this Source records.
func (s *Source) Claims(path string) bool {
	return !s.cfg.LeaveWorkqueueMask && path == filepath.Join(s.cfg.SysfsRoot, WorkqueueMask)
}

// Plan lists the workqueue mask and the top-level cgroups, narrowed to the
// housekeeping set; nothing when nothing is kept, so that every file the
// journal holds goes back to its original.
func (s *Source) Plan() (hostfiles.Plan, error) {
	kept := s.cfg.Kept()
	// The floor counts the CPUs host processes run on: not the isolated ones.
	set, widened := Set(s.cfg.Online, s.cfg.DomainIsolated, kept, s.cfg.Floor)
	s.setLast(set)
	if kept.Empty() || set.Equals(s.cfg.Online) {
		s.warned.Clear("floor")
		plan, err := s.releasePlan()
		if err != nil {
			return hostfiles.Plan{}, err
		}
		// Nothing confined: a thread forked from now on has its
		// parent's own affinity.
		s.prevHost, s.seen, s.planned, s.resetting, s.unitsHost = cpuset.New(), nil, true, false, cpuset.New()
		// The global workqueue mask may still leave CPUs out for
		// kernelWork.workqueues.
		plan.Changes = append(plan.Changes, s.workqueueChanges(s.cfg.Online)...)
		return plan, nil
	}
	// The host's processes: the set less the CPUs they never ran on,
	// unless that leaves none.
	base := s.cfg.Online.Difference(s.cfg.DomainIsolated)
	if base.IsEmpty() {
		base = s.cfg.Online
	}
	host := set.Difference(s.cfg.DomainIsolated)
	if host.IsEmpty() {
		host = set
	}
	switch {
	case widened.IsEmpty():
		s.warned.Clear("floor")
	case host.Size() < s.cfg.Floor:
		s.warned.Once("floor", fmt.Sprintf("housekeeping: host processes keep CPUs %s, which should be kept free, so that they have as many as the node has outside isolcpus (%d, fewer than %d: pools.exclusive-non-isolcpus.minInfraCPUs): housekeeping set %s", widened, host.Size(), s.cfg.Floor, set))
	default:
		s.warned.Once("floor", fmt.Sprintf("housekeeping: host processes keep CPUs %s, which should be kept free, so that they have %d CPUs (pools.exclusive-non-isolcpus.minInfraCPUs): housekeeping set %s", widened, s.cfg.Floor, set))
	}
	// What follows is listed anew at every pass, kicked or not (the
	// top-level cgroups or systemd's units, the threads in /proc), unlike
	// the IRQs or the power files, which the rescan lists
	// (hostfiles.Rescanner): a unit starts and a process forks at any
	// time, and a new thread (its inherited affinity, Change.Original)
	// must be planned by the next pass, not the next rescan. The files
	// themselves are read only when their want changed (the reconciler's
	// settled files), and the threads' affinities, which any cgroup write
	// resets (Resettable), at every pass.
	var plan hostfiles.Plan
	plan.Changes = append(plan.Changes, s.workqueueChanges(set)...)
	var pods []string
	if s.cfg.PodCgroups != nil {
		pods = s.cfg.PodCgroups()
	}
	v1 := !unified(s.cfg.CgroupRoot)
	switch {
	case v1:
		// No cpuset in cgroup v2: the host's user-space threads are
		// confined by affinity, with the kernel threads.
		s.warned.Clear("cgroups")
		s.warned.Clear("systemd")
		s.forgetGone(nil)
	case Systemd(s.cfg.CgroupRoot, s.cfg.ProcRoot):
		// systemd owns the slices: AllowedCPUs= through its D-Bus API,
		// never their cpuset.cpus.
		s.warned.Clear("cgroups")
		changes, skipped := s.systemdChanges(host, pods)
		plan.Changes = append(plan.Changes, changes...)
		s.forgetGone(skipped)
		if len(changes) > 0 && !host.Equals(s.unitsHost) {
			// systemd writes the units' cgroups after it answers: one
			// more pass right after sets the threads' affinities again
			// where that reset them.
			plan.Pending = true
		}
		s.unitsHost = host
	default:
		s.warned.Clear("systemd")
		changes, err := s.cgroupChanges(host, pods)
		if err != nil {
			return hostfiles.Plan{}, err
		}
		plan.Changes = append(plan.Changes, changes...)
	}
	if !s.cfg.ThreadAffinity {
		what := "unbound kernel threads are not confined, and the host threads' affinities, which a cpuset change resets, are not recorded"
		if v1 {
			what = "host processes (cgroup v1) and unbound kernel threads are not confined"
		}
		s.warned.Once("affinity", fmt.Sprintf("housekeeping: %s: this process does not set threads' affinity", what))
		return plan, nil
	}
	s.warned.Clear("affinity")
	prev := s.prevHost
	if !s.planned && s.resumed {
		// An earlier process left the host confined: as a restart keeps
		// the CPUs held, to this pass's set.
		prev = host
	}
	// Every host thread, on cgroup v2 too: a cpuset change resets its
	// affinity (threads.go).
	th, err := s.threadChanges(host, prev, s.lookedAfter, base, true, !v1, false, pods)
	if err != nil {
		return hostfiles.Plan{}, fmt.Errorf("housekeeping: %w", err)
	}
	s.prevHost, s.planned, s.resetting = host, true, !v1
	s.log.Debugf("housekeeping: narrowing the affinity of %d kernel threads and %d host threads to CPUs %s", th.kernel, th.users, host)
	plan.Changes = append(plan.Changes, th.changes...)
	return plan, nil
}

// releasePlan is the plan of the pass that releases the host on cgroup
// v2 after a confining pass: the journal restores the cgroups or units,
// which resets their tasks' affinities to every CPU, and then each host
// thread gets its original affinity back, a thread forked since the
// last pass too (threadChanges' release). Nothing when the previous pass
// did not confine them: the journal restores what it holds, in its
// order (the affinities after the cgroups). Pending: one more pass right
// after restores the records, once systemd has written the units'
// cgroups.
func (s *Source) releasePlan() (hostfiles.Plan, error) {
	if !s.resetting || !s.cfg.ThreadAffinity {
		return hostfiles.Plan{}, nil
	}
	base := s.cfg.Online.Difference(s.cfg.DomainIsolated)
	if base.IsEmpty() {
		base = s.cfg.Online
	}
	var pods []string
	if s.cfg.PodCgroups != nil {
		pods = s.cfg.PodCgroups()
	}
	th, err := s.threadChanges(base, s.prevHost, s.lookedAfter, base, true, true, true, pods)
	if err != nil {
		return hostfiles.Plan{}, fmt.Errorf("housekeeping: %w", err)
	}
	return hostfiles.Plan{Changes: th.changes, Pending: true}, nil
}

// workqueueChanges narrows the global unbound workqueue mask to set less
// WorkqueueAlsoOff's CPUs; none when the mask is another owner's, or when
// set is every online CPU and nothing else is left out (nothing to
// narrow: a recorded mask goes back to its original). If leaving those
// CPUs out too would leave set empty, set alone is kept.
func (s *Source) workqueueChanges(set cpuset.CPUSet) []hostfiles.Change {
	if s.cfg.LeaveWorkqueueMask {
		s.warned.Clear("workqueue")
		return nil
	}
	if s.cfg.WorkqueueAlsoOff != nil {
		if narrower := set.Difference(s.cfg.WorkqueueAlsoOff()); !narrower.IsEmpty() {
			set = narrower
		}
	}
	if set.Equals(s.cfg.Online) {
		return nil
	}
	wq := filepath.Join(s.cfg.SysfsRoot, WorkqueueMask)
	if _, err := os.Stat(wq); err != nil {
		s.warned.Once("workqueue", fmt.Sprintf("housekeeping: unbound kernel work is not confined: %v", err))
		return nil
	}
	s.warned.Clear("workqueue")
	return []hostfiles.Change{workqueueChange(s.cfg.SysfsRoot, set)}
}

// cgroupChanges are the cpuset.cpus of the top-level cgroups other than
// the pods' (cgroup v2 without systemd).
func (s *Source) cgroupChanges(host cpuset.CPUSet, pods []string) ([]hostfiles.Change, error) {
	dirs, skipped, err := cgroupTargets(s.cfg.CgroupRoot, pods)
	switch {
	case errors.Is(err, ErrNotDone):
		what := "host processes are not confined"
		if s.cfg.ThreadAffinity {
			what = "the host's cgroups are not confined (their threads are, by affinity)"
		}
		s.warned.Once("cgroups", fmt.Sprintf("housekeeping: %s: %v", what, err))
	case err != nil:
		return nil, fmt.Errorf("housekeeping: %w", err)
	default:
		s.warned.Clear("cgroups")
	}
	var changes []hostfiles.Change
	for _, dir := range dirs {
		changes = append(changes, cgroupChange(dir, host))
		s.warned.Clear(dir)
	}
	for dir, why := range skipped {
		s.warned.Once(dir, fmt.Sprintf("housekeeping: cgroup %s is not confined: %s", dir, why))
	}
	s.forgetGone(skipped)
	return changes, nil
}

// systemdChanges are the AllowedCPUs of the host's top-level units (the
// units below -.slice whose cgroup exists: a unit that is not active has
// none; systemdTargets), or nothing when systemd's API cannot be reached
// now: pinning never depends on systemd, so the pass goes on without
// them, and the next pass tries again. A unit changed earlier and not
// planned now is restored by the reconciler (retried while systemd
// cannot be reached). skipped are the units left alone, with why.
func (s *Source) systemdChanges(set cpuset.CPUSet, pods []string) (changes []hostfiles.Change, skipped map[string]string) {
	if s.cfg.Systemd == nil {
		s.warned.Once("systemd", fmt.Sprintf("housekeeping: host processes are not confined: systemd manages the cgroups (%s/init.scope, or PID 1), and this process has no access to its D-Bus API", s.cfg.CgroupRoot))
		return nil, nil
	}
	if err := s.cfg.Systemd.Reachable(); err != nil {
		s.unreachable.Add(1)
		s.warned.Once("systemd", fmt.Sprintf("housekeeping: host processes are not confined for now: systemd manages the cgroups, and its D-Bus API cannot be reached: %v; tried again at each pass (pinning does not depend on it)", err))
		return nil, nil
	}
	s.warned.Clear("systemd")
	units, skipped, err := systemdTargets(s.cfg.CgroupRoot, pods)
	if err != nil {
		s.warned.Once("systemd", fmt.Sprintf("housekeeping: host processes are not confined for now: %v", err))
		return nil, nil
	}
	for _, unit := range units {
		changes = append(changes, systemdChange(unit, set))
		s.warned.Clear(filepath.Join(s.cfg.CgroupRoot, unit))
	}
	for dir, why := range skipped {
		s.warned.Once(dir, fmt.Sprintf("housekeeping: unit %s is not confined: %s", filepath.Base(dir), why))
	}
	return changes, skipped
}

// SystemdUnreachable counts the passes that found systemd's D-Bus API
// unreachable and left the host's units as they were.
func (s *Source) SystemdUnreachable() uint64 { return s.unreachable.Load() }

var _ hostfiles.Explainer = (*Source)(nil)

// Explain hints at why a file is refused for good.
func (s *Source) Explain(path string, err error) string {
	if IsSystemdPath(path) {
		if errors.Is(err, syscall.EACCES) {
			return "systemd lets a caller set unit properties when it is root with CAP_SYS_ADMIN, or when polkit allows org.freedesktop.systemd1.manage-units"
		}
		return ""
	}
	if IsAffinityPath(path) {
		switch {
		case errors.Is(err, syscall.EINVAL):
			return "the kernel allows the thread none of those CPUs: its cpuset (cgroup v1) does not include them, or it is a kernel thread the kernel keeps where it is"
		case errors.Is(err, syscall.EPERM):
			return "setting another process's affinity needs CAP_SYS_NICE"
		}
		return ""
	}
	if !errors.Is(err, syscall.EROFS) {
		return ""
	}
	if path == filepath.Join(s.cfg.SysfsRoot, WorkqueueMask) {
		return "/sys is read-only here: a systemd unit with ProtectKernelTunables= needs ReadWritePaths=/sys/devices/virtual/workqueue"
	}
	return "the cgroup tree is read-only here: a systemd unit needs ReadWritePaths=/sys/fs/cgroup"
}

// LastSet is the housekeeping set of the last pass (every online CPU
// before the first).
func (s *Source) LastSet() cpuset.CPUSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *Source) setLast(set cpuset.CPUSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = set
}

// forgetGone drops the warnings of cgroups no longer skipped (removed,
// or since confined), so that Problems lists only what stays.
func (s *Source) forgetGone(skipped map[string]string) {
	s.warned.Retain(func(key string) bool {
		_, still := skipped[key]
		return still || !filepath.IsAbs(key)
	})
}

// Problems are what housekeeping cannot confine now, with why (for
// status and tests).
func (s *Source) Problems() []string { return s.warned.List() }
