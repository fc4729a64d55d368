package housekeeping

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

const boot = "8c0f7f0e-3b1a-4d5e-9f60-0a1b2c3d4e5f"

// node is a fake host of 8 CPUs: sysfs with the unbound workqueue mask,
// a cgroup v2 hierarchy that delegates cpuset to its top-level cgroups,
// and /proc with a PID 1 that is not systemd.
type node struct {
	dir                        string
	sysfs, cgroup, proc, state string
	online                     cpuset.CPUSet
}

// originals are the node's files as it booted, relative to the cgroup
// root, or "wq" for the workqueue mask, which leaves out CPU 0 (as
// isolcpus= leaves CPUs out of it). "pinned" is a service someone pinned
// to CPUs 6-7; "user" is confined already; "kubepods" is the pods' tree;
// "part" a partition root; "threaded" has no cpuset.cpus.
var originals = map[string]string{
	"wq":                           "fe",
	"system/cpuset.cpus":           "",
	"user/cpuset.cpus":             "0-5",
	"pinned/cpuset.cpus":           "6-7",
	"kubepods/cpuset.cpus":         "0-7",
	"part/cpuset.cpus":             "7",
	"part/cpuset.cpus.partition":   "root",
	"system/cpuset.cpus.partition": "member",
	"threaded/cgroup.type":         "threaded",
}

func newNode(t *testing.T) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{dir: dir, sysfs: filepath.Join(dir, "sysfs"), cgroup: filepath.Join(dir, "cgroup"), proc: filepath.Join(dir, "proc"),
		state: filepath.Join(dir, "state", "state.json"), online: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)}
	write := func(path, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content+"\n"), 0o644))
	}
	for rel, v := range originals {
		write(n.path(rel), v)
	}
	write(filepath.Join(n.cgroup, "cgroup.controllers"), "cpuset cpu io memory pids")
	write(filepath.Join(n.cgroup, "cgroup.subtree_control"), "cpuset cpu memory")
	// The root's CPUs as the kernel applies them: "part", a partition
	// root, has taken CPU 7 out of them.
	write(filepath.Join(n.cgroup, "cpuset.cpus.effective"), "0-6")
	write(filepath.Join(n.proc, "1", "comm"), "init")
	require.NoError(t, os.MkdirAll(filepath.Dir(n.state), 0o755))
	return n
}

// path is a file of originals on disk.
func (n *node) path(rel string) string {
	if rel == "wq" {
		return filepath.Join(n.sysfs, WorkqueueMask)
	}
	return filepath.Join(n.cgroup, rel)
}

func (n *node) read(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(n.path(rel))
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

// files reads every file of originals.
func (n *node) files(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for rel := range originals {
		out[rel] = n.read(t, rel)
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

// keeper holds the kept CPUs a test changes between passes.
type keeper struct {
	mu   sync.Mutex
	kept Kept
}

func (k *keeper) set(held cpuset.CPUSet) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept = Kept{Held: held}
}

func (k *keeper) get() Kept {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kept
}

// process is one run of the plugin's housekeeping: a journal, a Source
// and a reconciler over fsys, confined to the roots the plugin gives.
type process struct {
	src  *Source
	r    *hostfiles.Reconciler
	keep *keeper
	hook *logtest.Hook
}

func (n *node) start(t *testing.T, fsys hostfiles.FS, floor int) *process {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	j, _, err := hostfiles.OpenJournal(fsys, hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	k := &keeper{}
	src := NewSource(Config{SysfsRoot: n.sysfs, CgroupRoot: n.cgroup, ProcRoot: n.proc, Online: n.online, Floor: floor, Kept: k.get, Recorded: j.Records()}, log)
	r := hostfiles.NewReconciler(fsys, j, log, hostfiles.DefaultTiming, src)
	r.RestoreOnlyUnder(filepath.Join(n.sysfs, "sys/devices/virtual/workqueue"), n.cgroup)
	t.Cleanup(r.Close)
	return &process{src: src, r: r, keep: k, hook: hook}
}
