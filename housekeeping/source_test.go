package housekeeping

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// TestShrinksAndWidens: the workqueue mask and the top-level cgroups lose
// the CPUs granted, each from its own original, and get exactly their
// originals back when nothing is kept. The pods' tree, a partition root
// and a cgroup without cpuset.cpus are left alone; a cgroup pinned only to
// kept CPUs is refused (counted), not emptied, and narrowed once one of
// its CPUs is free again.
func TestShrinksAndWidens(t *testing.T) {
	n := newNode(t)
	p := n.start(t, hostfiles.OS{}, 1)
	require.NoError(t, p.r.Flush())
	assert.Equal(t, originals, n.files(t), "nothing kept: nothing changed")

	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, with(map[string]string{"wq": "3e", "system/cpuset.cpus": "0-5"}), n.files(t))
	st := p.r.Status()
	assert.Equal(t, 2, st.Records[Owner], "the mask and system.slice; user was within the set already")
	require.Len(t, st.Failures, 1)
	assert.Equal(t, n.path("pinned/cpuset.cpus"), st.Failures[0].Path)
	assert.Contains(t, st.Failures[0].Error, "pinned to CPUs 6-7, none of the housekeeping set 0-5")
	assert.Equal(t, "0-5", p.src.LastSet().String())
	problems := strings.Join(p.src.Problems(), "\n")
	assert.Contains(t, problems, "part is not confined: it is a cpuset partition (root)")
	assert.Contains(t, problems, "threaded is not confined: it has no cpuset.cpus")
	assert.NotContains(t, problems, "kubepods")

	p.keep.set(cpuset.New(7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, with(map[string]string{"wq": "7e", "system/cpuset.cpus": "0-6", "pinned/cpuset.cpus": "6"}), n.files(t), "widened from the originals")
	assert.Empty(t, p.r.Status().Failures)

	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, originals, n.files(t), "released: every file exactly as it was")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestNeverBelowTheFloor: with minInfraCPUs 3 and CPUs 2-7 granted, the
// host keeps 3 CPUs, and the log says which kept CPUs it keeps.
func TestNeverBelowTheFloor(t *testing.T) {
	n := newNode(t)
	p := n.start(t, hostfiles.OS{}, 3)
	p.keep.set(cpuset.New(2, 3, 4, 5, 6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-2", n.read(t, "system/cpuset.cpus"))
	assert.Equal(t, "06", n.read(t, "wq"), "CPUs 1-2: CPU 0 was never in it")
	assert.Contains(t, strings.Join(p.src.Problems(), "\n"), "host processes keep CPUs 2, which should be kept free, so that they have 3 CPUs (pools.exclusive-non-isolcpus.minInfraCPUs)")
}

// TestFloorCountsWhereHostProcessesRun (issue 41, item 9): the floor
// (minInfraCPUs) is what host processes get, the housekeeping set less
// the isolcpus= CPUs they never run on: kept CPUs that are not isolated
// are given back until they have it, and when they cannot (every CPU
// that is not isolated is kept and the floor is higher), every such CPU
// is given back, as the floor does above the node's size. An isolated
// kept CPU is never given back for it: host processes would not run there.
func TestFloorCountsWhereHostProcessesRun(t *testing.T) {
	for _, tc := range []struct {
		name           string
		isolated, held cpuset.CPUSet
		floor          int
		host, wq, warn string
	}{
		{"isolated CPUs do not count", cpuset.New(6, 7), cpuset.New(1, 2, 3, 4, 5), 2, "0-1", "c2", "host processes keep CPUs 1, which should be kept free, so that they have 2 CPUs"},
		{"met without giving back", cpuset.New(6, 7), cpuset.New(2, 3, 4, 5), 2, "0-1", "c2", ""},
		{"isolated held CPUs stay kept", cpuset.New(6, 7), cpuset.New(1, 2, 3, 4, 5, 6, 7), 3, "0-2", "06", "host processes keep CPUs 1-2, which should be kept free, so that they have 3 CPUs"},
		{"cannot be met", cpuset.New(4, 5, 6, 7), cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), 6, "0-3", "0e", "host processes keep CPUs 0-3, which should be kept free, so that they have as many as the node has outside isolcpus (4, fewer than 6"},
		{"no CPU isolated", cpuset.New(), cpuset.New(1, 2, 3, 4, 5), 2, "0,6-7", "c0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			p := n.start(t, hostfiles.OS{}, tc.floor)
			p.src.cfg.DomainIsolated = tc.isolated
			p.keep.set(tc.held)
			require.NoError(t, p.r.Flush())
			assert.Equal(t, tc.host, n.read(t, "system/cpuset.cpus"), "the host processes' cgroup")
			assert.Equal(t, tc.wq, n.read(t, "wq"))
			problems := strings.Join(p.src.Problems(), "\n")
			if tc.warn == "" {
				assert.NotContains(t, problems, "minInfraCPUs")
			} else {
				assert.Contains(t, problems, tc.warn)
			}
		})
	}
}

// TestCgroupsNotWrittenUnderSystemd: where systemd manages the cgroups
// (its init.scope, or PID 1), their cpuset.cpus are systemd's: not one
// cgroup file is written. Without access to systemd's D-Bus API (no
// Config.Systemd) the log says so once; the workqueue mask is confined
// all the same. systemd_test.go has the D-Bus path.
func TestCgroupsNotWrittenUnderSystemd(t *testing.T) {
	for name, systemd := range map[string]func(n *node) error{
		"init.scope": func(n *node) error { return os.MkdirAll(filepath.Join(n.cgroup, "init.scope"), 0o755) },
		"PID 1": func(n *node) error {
			return os.WriteFile(filepath.Join(n.proc, "1", "comm"), []byte("systemd\n"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := newNode(t)
			require.NoError(t, systemd(n))
			assert.True(t, Systemd(n.cgroup, n.proc))
			p := n.start(t, hostfiles.OS{}, 1)
			p.keep.set(cpuset.New(6, 7))
			require.NoError(t, p.r.Flush())
			require.NoError(t, p.r.Flush())
			assert.Equal(t, with(map[string]string{"wq": "3e"}), n.files(t))
			var warned []string
			for _, e := range p.hook.AllEntries() {
				if strings.Contains(e.Message, "D-Bus") {
					warned = append(warned, e.Message)
				}
			}
			require.Len(t, warned, 1, "said once")
			assert.Contains(t, warned[0], "housekeeping: host processes are not confined: systemd manages the cgroups")
			assert.Contains(t, warned[0], "no access to its D-Bus API")
		})
	}
}

// TestCgroupsSkippedWithoutCpuset: a root that does not delegate cpuset,
// or a cgroup v1 hierarchy (confined by affinity, which this process
// without an AffinityFS does not set: threads_test.go has it), is
// reported and left alone; the plugin never enables a controller.
func TestCgroupsSkippedWithoutCpuset(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(n *node) error
		says   string
	}{
		"not delegated": {func(n *node) error {
			return os.WriteFile(filepath.Join(n.cgroup, "cgroup.subtree_control"), []byte("cpu memory\n"), 0o644)
		}, "the root cgroup does not delegate the cpuset controller"},
		"cgroup v1": {func(n *node) error { return os.Remove(filepath.Join(n.cgroup, "cgroup.controllers")) }, "host processes (cgroup v1) and unbound kernel threads are not confined"},
	} {
		t.Run(name, func(t *testing.T) {
			n := newNode(t)
			require.NoError(t, tc.change(n))
			p := n.start(t, hostfiles.OS{}, 1)
			p.keep.set(cpuset.New(6, 7))
			require.NoError(t, p.r.Flush())
			assert.Equal(t, with(map[string]string{"wq": "3e"}), n.files(t))
			if name == "not delegated" {
				data, err := os.ReadFile(filepath.Join(n.cgroup, "cgroup.subtree_control"))
				require.NoError(t, err)
				assert.Equal(t, "cpu memory\n", string(data), "no controller enabled")
			}
			assert.Contains(t, strings.Join(p.src.Problems(), "\n"), tc.says)
		})
	}
}

// roFS is the host's file system where /sys is read-only, as under a
// systemd unit with ProtectKernelTunables= and no ReadWritePaths= for it.
type roFS struct {
	hostfiles.OS
	sysfs string
}

func (f roFS) WriteFile(path string, data []byte) error {
	if strings.HasPrefix(path, f.sysfs) {
		return &os.PathError{Op: "write", Path: path, Err: syscall.EROFS}
	}
	return f.OS.WriteFile(path, data)
}

// TestReadOnlySysfsIsRefused: a read-only /sys is a refusal, counted and
// explained with the unit's fix, not retried; the cgroups are confined
// all the same.
func TestReadOnlySysfsIsRefused(t *testing.T) {
	n := newNode(t)
	p := n.start(t, roFS{sysfs: n.sysfs}, 1)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, with(map[string]string{"system/cpuset.cpus": "0-5"}), n.files(t))
	st := p.r.Status()
	var hint string
	for _, f := range st.Failures {
		if f.Path == n.path("wq") {
			hint = f.Hint
		}
	}
	assert.Equal(t, "/sys is read-only here: a systemd unit with ProtectKernelTunables= needs ReadWritePaths=/sys/devices/virtual/workqueue", hint)
	assert.Equal(t, 1, st.Records[Owner], "the refused write left the mask as it was: nothing to restore")
}

// TestPodCgroupsLeftAlone: a kubelet whose cgroup root is not kubepods
// (--cgroup-root) has its pods' tree named by the runtime's sandboxes:
// it is left alone like kubepods, or the exclusive containers below it
// would be confined to the host's CPUs.
func TestPodCgroupsLeftAlone(t *testing.T) {
	n := newNode(t)
	k8s := filepath.Join(n.cgroup, "k8s", "cpuset.cpus")
	require.NoError(t, os.MkdirAll(filepath.Dir(k8s), 0o755))
	require.NoError(t, os.WriteFile(k8s, []byte("\n"), 0o644))
	p := n.start(t, hostfiles.OS{}, 1)
	p.src.cfg.PodCgroups = func() []string { return []string{"k8s"} }
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-5", n.read(t, "system/cpuset.cpus"))
	data, err := os.ReadFile(k8s)
	require.NoError(t, err)
	assert.Equal(t, "\n", string(data), "the pods' tree is not touched")
}

// TestPodTreeBelowACgroupRootLeftAlone: a kubelet --cgroup-root puts
// kubepods below a top-level cgroup of its own, and makes it at its start:
// that cgroup is left alone before the first pod's sandbox names it and
// after the last one's is gone (the VM suite's pods' tree, issue 42).
func TestPodTreeBelowACgroupRootLeftAlone(t *testing.T) {
	n := newNode(t)
	root := filepath.Join(n.cgroup, "custom", "cpuset.cpus")
	require.NoError(t, os.MkdirAll(filepath.Join(n.cgroup, "custom", "kubepods"), 0o755))
	require.NoError(t, os.WriteFile(root, []byte("\n"), 0o644))
	p := n.start(t, hostfiles.OS{}, 1)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-5", n.read(t, "system/cpuset.cpus"))
	data, err := os.ReadFile(root)
	require.NoError(t, err)
	assert.Equal(t, "\n", string(data), "the cgroup root holding the pods' tree is not touched")
	for _, problem := range p.src.Problems() {
		assert.NotContains(t, problem, "custom", "not a problem: nothing to confine there")
	}
}

// TestSystemdNamedPodTreeBelowACgroupRootLeftAlone: the same without
// systemd as PID 1 (a kubelet's systemd driver names the pods' slice
// <root>-kubepods.slice below its --cgroup-root's slice).
func TestSystemdNamedPodTreeBelowACgroupRootLeftAlone(t *testing.T) {
	n := newNode(t)
	root := filepath.Join(n.cgroup, "custom.slice", "cpuset.cpus")
	require.NoError(t, os.MkdirAll(filepath.Join(n.cgroup, "custom.slice", "custom-kubepods.slice"), 0o755))
	require.NoError(t, os.WriteFile(root, []byte("\n"), 0o644))
	p := n.start(t, hostfiles.OS{}, 1)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-5", n.read(t, "system/cpuset.cpus"))
	data, err := os.ReadFile(root)
	require.NoError(t, err)
	assert.Equal(t, "\n", string(data), "the cgroup root holding the pods' tree is not touched")
}
