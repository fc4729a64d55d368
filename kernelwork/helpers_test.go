package kernelwork

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

const boot = "5b0e3c1a-9d2f-4e6a-8b7c-1d2e3f405162"

// node is a fake host of 8 CPUs, 1 of them isolcpus= (CPU 7): sysfs with
// network devices as the kernel lays them out (/sys/class/net/<dev> a
// symlink to the device's directory below /sys/devices) and the unbound
// workqueues.
type node struct {
	dir, sysfs, proc, state string
	online, isolated        cpuset.CPUSet
}

// device is a network device of the fake sysfs: its directory below
// sys/devices, ifindex, and receive queues' rps_cpus.
type device struct {
	dir     string
	ifindex string
	rx      []string
}

// devices are the node's network devices as it booted: a NIC whose
// second queue is steered to CPUs 2-3 only, the loopback with RPS off,
// and a pod's veth steered everywhere.
var devices = map[string]device{
	"eth0":    {"sys/devices/pci0000:00/0000:00:03.0/net/eth0", "2", []string{"7f", "0c"}},
	"lo":      {"sys/devices/virtual/net/lo", "1", []string{"00"}},
	"veth1a2": {"sys/devices/virtual/net/veth1a2", "7", []string{"7f"}},
}

// originals are the node's mask files as it booted, by name: "<dev>
// rx-<n>", "wq" (the global mask, isolcpus= CPU 7 left out by the
// kernel) and "wq <name>" (a WQ_SYSFS workqueue's mask).
var originals = map[string]string{
	"eth0 rx-0": "7f", "eth0 rx-1": "0c", "lo rx-0": "00", "veth1a2 rx-0": "7f",
	"wq": "7f", "wq writeback": "ff", "wq nvme-wq": "0c",
}

func newNode(t *testing.T) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{dir: dir, sysfs: filepath.Join(dir, "sysfs"), proc: filepath.Join(dir, "proc"), state: filepath.Join(dir, "state", "state.json"),
		online: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), isolated: cpuset.New(7)}
	for name, d := range devices {
		n.addDevice(t, name, d)
	}
	write(t, filepath.Join(n.sysfs, GlobalWorkqueueMask), originals["wq"])
	write(t, filepath.Join(n.sysfs, WorkqueueDir, "writeback", "cpumask"), originals["wq writeback"])
	write(t, filepath.Join(n.sysfs, WorkqueueDir, "nvme-wq", "cpumask"), originals["wq nvme-wq"])
	// A bound (per-CPU) workqueue has no cpumask.
	write(t, filepath.Join(n.sysfs, WorkqueueDir, "events_freezable", "per_cpu"), "1")
	require.NoError(t, os.MkdirAll(filepath.Dir(n.state), 0o755))
	return n
}

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o644))
}

// addDevice makes a device's directory and its /sys/class/net symlink.
func (n *node) addDevice(t *testing.T, name string, d device) {
	t.Helper()
	real := filepath.Join(n.sysfs, d.dir)
	write(t, filepath.Join(real, "ifindex"), d.ifindex)
	for i, mask := range d.rx {
		write(t, filepath.Join(real, "queues", "rx-"+string(rune('0'+i)), "rps_cpus"), mask)
	}
	link := filepath.Join(n.sysfs, NetClass, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
	rel, err := filepath.Rel(filepath.Dir(link), real)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(rel, link))
}

// removeDevice unregisters a device (a pod's veth deleted).
func (n *node) removeDevice(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(filepath.Join(n.sysfs, devices[name].dir)))
	require.NoError(t, os.Remove(filepath.Join(n.sysfs, NetClass, name)))
}

// path is a mask file by its name in originals.
func (n *node) path(name string) string {
	switch {
	case name == "wq":
		return filepath.Join(n.sysfs, GlobalWorkqueueMask)
	case strings.HasPrefix(name, "wq "):
		return filepath.Join(n.sysfs, WorkqueueDir, strings.TrimPrefix(name, "wq "), "cpumask")
	}
	dev, queue, _ := strings.Cut(name, " ")
	return filepath.Join(n.sysfs, NetClass, dev, "queues", queue, "rps_cpus")
}

func (n *node) read(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(n.path(name))
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

// files reads every mask of originals.
func (n *node) files(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name := range originals {
		out[name] = n.read(t, name)
	}
	return out
}

// with is originals with some files changed.
func with(changes map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range originals {
		out[k] = v
	}
	for k, v := range changes {
		out[k] = v
	}
	return out
}

// holder holds the held CPUs a test changes between passes.
type holder struct {
	mu   sync.Mutex
	held cpuset.CPUSet
}

func (h *holder) set(held cpuset.CPUSet) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = held
}

func (h *holder) get() cpuset.CPUSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// process is one run of the plugin's kernel-work sources: a journal, the
// two Sources and a reconciler over fsys, confined as the plugin confines
// them.
type process struct {
	rps  *RPSSource
	wq   *WorkqueueSource
	r    *hostfiles.Reconciler
	held *holder
	hook *logtest.Hook
}

func (n *node) start(t *testing.T, fsys hostfiles.FS, global bool) *process {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	j, _, err := hostfiles.OpenJournal(fsys, hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	h := &holder{held: cpuset.New()}
	cfg := Config{SysfsRoot: n.sysfs, ProcRoot: n.proc, Online: n.online, DomainIsolated: n.isolated, Held: h.get}
	rps := NewRPSSource(cfg, log)
	wq := NewWorkqueueSource(WorkqueueConfig{Config: cfg, Global: global}, log)
	r := hostfiles.NewReconciler(fsys, j, log, hostfiles.DefaultTiming, rps, wq)
	r.RestoreOnlyUnder(filepath.Join(n.sysfs, WorkqueueDir), filepath.Join(n.proc, RPSDefaultMask))
	r.RestoreAlsoWhere(RPSFileRule(n.sysfs))
	t.Cleanup(r.Close)
	return &process{rps: rps, wq: wq, r: r, held: h, hook: hook}
}

// journal is the journal's records.
func (n *node) journal(t *testing.T) map[string]hostfiles.Record {
	t.Helper()
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	return records
}
