package kernelwork

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// WorkqueueOwner is the workqueue Source's name in the journal.
const WorkqueueOwner = "workqueues"

// WorkqueueDir is the unbound workqueues' directory below the sysfs root:
// cpumask, the global mask every unbound work item runs within, and one
// directory per workqueue created with WQ_SYSFS (writeback, nvme-wq,
// kcryptd, ...), whose own cpumask exists when it is unbound.
const WorkqueueDir = "sys/devices/virtual/workqueue"

// GlobalWorkqueueMask is the global unbound workqueue mask below the
// sysfs root (housekeeping.WorkqueueMask, the same file).
const GlobalWorkqueueMask = WorkqueueDir + "/cpumask"

// WorkqueueFiles lists the per-workqueue cpumask files below sysfsRoot,
// sorted (not the global one).
func WorkqueueFiles(sysfsRoot string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(sysfsRoot, WorkqueueDir, "*", "cpumask"))
	if err != nil {
		return nil, fmt.Errorf("listing the workqueues' cpumask files: %w", err)
	}
	slices.Sort(files)
	return files, nil
}

// WorkqueueConfig is Config and whether the Source changes the global
// mask.
type WorkqueueConfig struct {
	Config
	// Global: the Source narrows the global mask too. The plugin leaves
	// it to housekeeping when housekeeping runs (it narrows the global
	// mask to its housekeeping set, and two owners of one file would
	// fight over it).
	Global bool
}

// WorkqueueSource keeps unbound workqueues off the held CPUs: the global
// mask (when Global) and each WQ_SYSFS workqueue's mask get their original
// less the held CPUs. The kernel runs an unbound work item on its
// workqueue's mask within the global one (and on the global one when
// they do not meet), so the global mask covers every unbound workqueue,
// and a workqueue's own mask covers it whatever the global mask is.
type WorkqueueSource struct {
	cfg    WorkqueueConfig
	log    *logrus.Logger
	warned *hostfiles.Warnings
}

var (
	_ hostfiles.Source    = (*WorkqueueSource)(nil)
	_ hostfiles.Explainer = (*WorkqueueSource)(nil)
	_ hostfiles.Claimer   = (*WorkqueueSource)(nil)
)

// NewWorkqueueSource returns the Source.
func NewWorkqueueSource(cfg WorkqueueConfig, log *logrus.Logger) *WorkqueueSource {
	return &WorkqueueSource{cfg: cfg, log: log, warned: hostfiles.NewWarnings(log)}
}

// Owner names the Source in the journal.
func (s *WorkqueueSource) Owner() string { return WorkqueueOwner }

// Claims implements hostfiles.Claimer: the global mask, when Global, may
// have been recorded by housekeeping while a pool had it; a pass in which
// this Source fails to plan leaves it as it is. The workqueues' own masks
// only this Source records.
func (s *WorkqueueSource) Claims(path string) bool {
	return s.cfg.Global && path == filepath.Join(s.cfg.SysfsRoot, GlobalWorkqueueMask)
}

// Plan lists the masks, narrowed; nothing when nothing is held, so that
// every mask the journal holds goes back to its original. A workqueue
// created later (a driver loaded) is planned at the next pass.
func (s *WorkqueueSource) Plan() (hostfiles.Plan, error) {
	held := s.cfg.Held()
	if held.IsEmpty() {
		return hostfiles.Plan{}, nil
	}
	runnable := s.cfg.runnable()
	var plan hostfiles.Plan
	if s.cfg.Global {
		global := filepath.Join(s.cfg.SysfsRoot, GlobalWorkqueueMask)
		if _, err := os.Stat(global); err != nil {
			s.warned.Once("global", fmt.Sprintf("workqueues: unbound kernel work is not kept off held CPUs: %v", err))
		} else {
			s.warned.Clear("global")
			plan.Changes = append(plan.Changes, maskChange(global, "the unbound workqueue mask", held, runnable))
		}
	}
	files, err := WorkqueueFiles(s.cfg.SysfsRoot)
	if err != nil {
		return hostfiles.Plan{}, err
	}
	for _, f := range files {
		plan.Changes = append(plan.Changes, maskChange(f, "the mask of workqueue "+filepath.Base(filepath.Dir(f)), held, runnable))
	}
	return plan, nil
}

// Explain says why the kernel may refuse a workqueue mask.
func (s *WorkqueueSource) Explain(path string, err error) string {
	switch {
	case errors.Is(err, syscall.EROFS):
		return "/sys is read-only here: a systemd unit with ProtectKernelTunables= needs ReadWritePaths=/sys/devices/virtual/workqueue"
	case errors.Is(err, syscall.EINVAL):
		return "the kernel refuses a workqueue mask with no CPU it may run unbound work on (isolcpus= CPUs are not)"
	}
	return ""
}
