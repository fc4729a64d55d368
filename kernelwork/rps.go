package kernelwork

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// RPSOwner is the RPS Source's name in the journal of original values.
const RPSOwner = "rps"

// NetClass lists the network devices below the sysfs root. It shows the
// devices of the network namespace the plugin runs in: the host's, as the
// DaemonSet runs with hostNetwork (a pod's own end of its veth, in the
// pod's namespace, is not seen; its host end is).
const NetClass = "sys/class/net"

// RPSDefaultMask is net.core.rps_default_mask below the proc root (Linux
// 6.2 and later): the rps_cpus every receive queue of a network device
// registered from then on starts with (a new pod's veth). Left with a held
// CPU, a device born between two passes would steer packets there until
// the next pass narrows its queues.
const RPSDefaultMask = "sys/net/core/rps_default_mask"

// RPSFiles lists the receive queues' rps_cpus files of every network
// device below sysfsRoot, sorted. A kernel without CONFIG_RPS has none.
func RPSFiles(sysfsRoot string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(sysfsRoot, NetClass, "*", "queues", "rx-*", "rps_cpus"))
	if err != nil {
		return nil, fmt.Errorf("listing the rps_cpus files: %w", err)
	}
	slices.Sort(files)
	return files, nil
}

// rpsShape is the end of an rps_cpus file's path, under /sys/class/net
// or, its symlinks resolved, under the device's directory below
// /sys/devices (.../net/<dev>/queues/rx-<n>/rps_cpus).
var rpsShape = regexp.MustCompile(`/net/[^/]+/queues/rx-[0-9]+/rps_cpus$`)

// RPSFileRule admits the journal's records of rps_cpus files below
// sysfsRoot's sys directory to be restored
// (hostfiles.Reconciler.RestoreAlsoWhere): a network device's directory
// lies anywhere below /sys/devices, a root too wide to give.
func RPSFileRule(sysfsRoot string) func(path string) bool {
	sys := filepath.Join(filepath.Clean(sysfsRoot), "sys") + "/"
	return func(path string) bool {
		return strings.HasPrefix(path, sys) && rpsShape.MatchString(path)
	}
}

// RPSSource keeps receive packet steering off the held CPUs: each rps_cpus
// mask that names a held CPU gets its original less the held CPUs.
type RPSSource struct {
	cfg    Config
	log    *logrus.Logger
	warned *hostfiles.Warnings
}

var (
	_ hostfiles.Source     = (*RPSSource)(nil)
	_ hostfiles.Identifier = (*RPSSource)(nil)
	_ hostfiles.Explainer  = (*RPSSource)(nil)
)

// NewRPSSource returns the Source.
func NewRPSSource(cfg Config, log *logrus.Logger) *RPSSource {
	return &RPSSource{cfg: cfg, log: log, warned: hostfiles.NewWarnings(log)}
}

// Owner names the Source in the journal.
func (s *RPSSource) Owner() string { return RPSOwner }

// Plan lists every receive queue's rps_cpus, as it is now: a device that
// appeared since the last pass (a hotplugged NIC, a new pod's veth) is
// planned here, one that went away is no longer (its record is dropped
// when its restore finds it gone). Nothing when nothing is held, so that
// every mask the journal holds goes back to its original.
//
// The devices are listed at every pass, kicked or not, unlike the IRQs
// (which the rescan lists, hostfiles.Rescanner): a pod's creation makes
// the device (its veth), and the pass its grant kicks is the one that
// must narrow it. Their files are read only when their want changed
// (the reconciler's settled files).
func (s *RPSSource) Plan() (hostfiles.Plan, error) {
	held := s.cfg.Held()
	if held.IsEmpty() {
		return hostfiles.Plan{}, nil
	}
	files, err := RPSFiles(s.cfg.SysfsRoot)
	if err != nil {
		return hostfiles.Plan{}, err
	}
	if len(files) == 0 {
		s.warned.Once("none", fmt.Sprintf("rps: no rps_cpus file below %s (a kernel without CONFIG_RPS, or no network device): nothing to keep off held CPUs", filepath.Join(s.cfg.SysfsRoot, NetClass)))
	} else {
		s.warned.Clear("none")
	}
	runnable := s.cfg.runnable()
	plan := hostfiles.Plan{Changes: make([]hostfiles.Change, 0, len(files)+1)}
	if def := s.defaultMask(); def != "" {
		plan.Changes = append(plan.Changes, maskChange(def, "the default receive packet steering mask of new network devices", held, runnable))
	}
	for _, f := range files {
		plan.Changes = append(plan.Changes, maskChange(f, "receive packet steering mask of "+queueName(f), held, runnable))
	}
	return plan, nil
}

// defaultMask is the path of net.core.rps_default_mask, "" when there is
// none (no ProcRoot, or a kernel before 6.2: nothing to narrow).
func (s *RPSSource) defaultMask() string {
	if s.cfg.ProcRoot == "" {
		return ""
	}
	path := filepath.Join(s.cfg.ProcRoot, RPSDefaultMask)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// queueName is "<dev> rx-<n>" of an rps_cpus file.
func queueName(path string) string {
	queue := filepath.Dir(path)
	return filepath.Base(filepath.Dir(filepath.Dir(queue))) + " " + filepath.Base(queue)
}

// Identity is the device's ifindex: a device name freed and taken again
// (a pod's veth name reused) is another device, whose original is what it
// holds now, not what the old one had. "" when the device is gone.
func (s *RPSSource) Identity(path string) string {
	if filepath.Base(path) != "rps_cpus" {
		return "" // the default mask: the network namespace's, whatever
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(path))), "ifindex"))
	if err != nil {
		return ""
	}
	return "ifindex " + strings.TrimSpace(string(data))
}

// Explain says why the kernel may refuse an rps_cpus mask.
func (s *RPSSource) Explain(path string, err error) string {
	isDefault := filepath.Base(path) != "rps_cpus"
	switch {
	case errors.Is(err, syscall.EROFS) && isDefault:
		// The packaged unit lists /proc/sys in ReadOnlyPaths=.
		return "/proc/sys is read-only here: a systemd unit needs ReadWritePaths=/proc/sys/net/core/rps_default_mask"
	case errors.Is(err, syscall.EROFS):
		return "/sys is read-only here: a systemd unit with ProtectKernelTunables= needs ReadWritePaths=/sys/devices"
	case errors.Is(err, syscall.EPERM) && !isDefault:
		// store_rps_map checks capable(CAP_NET_ADMIN), whoever owns the file.
		return "the kernel takes an rps_cpus write only with CAP_NET_ADMIN: a systemd unit needs it in CapabilityBoundingSet= (the packaged unit keeps CAP_SYS_NICE only)"
	case errors.Is(err, syscall.EINVAL):
		return "the kernel refuses an RPS mask left with only isolcpus= or nohz_full CPUs, which it takes out itself"
	}
	return ""
}
