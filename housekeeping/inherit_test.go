package housekeeping

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// housekeepingFS is the reconciler's FS as the plugin gives it on every
// node (plugin.hostFilesFS): a SystemdFS over fsys, whose D-Bus side a
// node without systemd never dials.
func (n *node) housekeepingFS(fsys hostfiles.FS) hostfiles.FS {
	return NewSystemdFS(fsys, nil, n.cgroup)
}

// journaled is the record of a cgroup file in the journal on disk.
func (n *node) journaled(t *testing.T, rel string) (hostfiles.Record, bool) {
	t.Helper()
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	rec, ok := records[filepath.Join(n.cgroup, rel)]
	return rec, ok
}

// TestEmptyOriginalOfPopulatedCgroupWidenedToParent (found in review):
// on cgroup v2 without systemd, a top-level cgroup whose cpuset.cpus was
// empty (every CPU of the root: the usual case once a runtime enables
// cpuset at the root) and that has tasks ("system") is narrowed to the
// housekeeping set. The release wrote the empty original back, which the
// kernel refuses for a populated cgroup (ENOSPC, cpuset.c
// validate_change); ENOSPC being transient, the pass was retried for
// ever, the cgroup stayed confined, and its threads' restores (lower
// Order) were held back with it. It gets the root's CPUs instead (0-6:
// "part", a partition root, has CPU 7), which the empty list gives it;
// the record of the empty original stays, as no failure, and the rescans
// keep the list the root's CPUs as they change.
func TestEmptyOriginalOfPopulatedCgroupWidenedToParent(t *testing.T) {
	n := newNode(t)
	p := n.start(t, n.housekeepingFS(populatedFS{}), 1)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	require.Equal(t, "0-5", n.read(t, "system/cpuset.cpus"))

	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush(), "no pass left failing for ever")
	assert.Equal(t, "0-6", n.read(t, "system/cpuset.cpus"), "released: the root's CPUs, which the empty list gave it")
	st := p.r.Status()
	assert.Empty(t, st.Failures)
	assert.Empty(t, st.LastError)
	assert.Equal(t, []string{n.path("system/cpuset.cpus")}, st.Nearest)
	assert.Equal(t, with(map[string]string{"system/cpuset.cpus": "0-6"}), n.files(t), "everything else exactly as it was")
	rec, left := n.journaled(t, "system/cpuset.cpus")
	assert.True(t, left, "the empty original stays recorded")
	assert.Equal(t, "", rec.Original)
	for _, line := range p.hook.AllEntries() {
		assert.NotContains(t, line.Message, "pass incomplete")
	}
	require.NoError(t, p.r.FlushKicked())
	assert.Equal(t, "0-6", n.read(t, "system/cpuset.cpus"), "not confined again")
	n.rootEffective(t, "0-5")
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-5", n.read(t, "system/cpuset.cpus"), "a rescan follows the root's CPUs, as the empty list would")
	assert.Empty(t, p.r.Status().Failures)
}

// TestWidenedCgroupKeepsItsEmptyOriginal: the root's CPUs written where
// the kernel refused the empty original are not taken as a new original
// by the next confinement, also by a restarted process; once the cgroup
// has no tasks, its release gives it the empty list back exactly.
func TestWidenedCgroupKeepsItsEmptyOriginal(t *testing.T) {
	n := newNode(t)
	p := n.start(t, n.housekeepingFS(populatedFS{}), 1)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	require.Equal(t, "0-6", n.read(t, "system/cpuset.cpus"))
	p.r.Close()

	// The next process, on a node whose "system" has lost its tasks.
	q := n.start(t, n.housekeepingFS(hostfiles.OS{}), 1)
	q.keep.set(cpuset.New(6, 7))
	require.NoError(t, q.r.Flush())
	assert.Equal(t, "0-5", n.read(t, "system/cpuset.cpus"))
	rec, ok := n.journaled(t, "system/cpuset.cpus")
	require.True(t, ok)
	assert.Equal(t, "", rec.Original, "the widened list is the empty one it stands for")
	assert.Equal(t, "0-5", n.read(t, "user/cpuset.cpus"))
	q.keep.set(cpuset.New())
	require.NoError(t, q.r.Flush())
	assert.Equal(t, originals, n.files(t), "every file exactly as the node booted")
}

// TestExplicitListNotTakenAsEmpty: a top-level cgroup pinned to some of
// the root's CPUs keeps that list as its original, and the kernel's
// refusal to empty a cgroup is only worked around for an empty write.
func TestExplicitListNotTakenAsEmpty(t *testing.T) {
	n := newNode(t)
	p := n.start(t, n.housekeepingFS(populatedFS{}), 1)
	p.keep.set(cpuset.New(5))
	require.NoError(t, p.r.Flush())
	rec, ok := n.journaled(t, "user/cpuset.cpus")
	require.True(t, ok)
	assert.Equal(t, "0-5", rec.Original)
	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, with(map[string]string{"system/cpuset.cpus": "0-6"}), n.files(t))

	assert.True(t, topLevelEmptyCPUs(n.cgroup, filepath.Join(n.cgroup, "system", "cpuset.cpus"), []byte("\n")))
	assert.False(t, topLevelEmptyCPUs(n.cgroup, filepath.Join(n.cgroup, "system", "cpuset.cpus"), []byte("0-3")))
	assert.False(t, topLevelEmptyCPUs(n.cgroup, filepath.Join(n.cgroup, "kubepods", "pod1", "cpuset.cpus"), nil), "below the top: another owner's")
	assert.False(t, topLevelEmptyCPUs(n.cgroup, filepath.Join(n.cgroup, "system", "cpuset.cpus.exclusive"), nil))
	assert.False(t, topLevelEmptyCPUs("", "/system/cpuset.cpus", nil))
}

// TestThreadsRestoredAfterWidenedCgroup: the threads' affinities, whose
// records (lower Order) wait for their cgroup's restore, get their
// originals back in the release of a cgroup whose empty original the
// kernel refuses; they were held back for ever.
func TestThreadsRestoredAfterWidenedCgroup(t *testing.T) {
	n, k := threadNode(t, false)
	p := n.start(t, n.housekeepingFS(NewAffinityFS(populatedFS{}, n.proc, k)), 1)
	p.src.cfg.ThreadAffinity = true
	p.src.cfg.PodCgroups = func() []string { return []string{"custompods"} }
	p.r.RestoreOnlyUnder(filepath.Join(n.sysfs, "sys/devices/virtual/workqueue"), n.cgroup, AffinityRoot)
	p.keep.set(cpuset.New(6, 7))
	require.NoError(t, p.r.Flush())
	require.Equal(t, threadLife[0].aff, k.affinities())

	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, booted(), k.affinities())
	assert.Equal(t, with(map[string]string{"system/cpuset.cpus": "0-6"}), n.files(t))
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Equal(t, []string{n.path("system/cpuset.cpus")}, slices.Collect(maps.Keys(records)), "nothing left to restore but the empty original the kernel refuses for now")
}
