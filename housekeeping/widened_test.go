package housekeeping

// A top-level cgroup whose empty cpuset.cpus original the kernel will not
// take back while it has tasks holds the root's CPUs (emptyCPUs), and its
// journal record of the empty original stays until the empty list is
// back. The root's CPUs move (a CPU offline, or taken by a cpuset
// partition, the plugin's own isolated partitions included), so no list
// the file holds says, by itself, that its original was empty: only the
// record does (found in review: a guess from the root's CPUs of the next
// confinement recorded the widened list as the original, and an
// administrator's list as empty).

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/crashfs"
)

// rootEffective sets the fake root's cpuset.cpus.effective: CPUs offline,
// or given to a cpuset partition ("part" has CPU 7), are not in it.
func (n *node) rootEffective(t *testing.T, cpus string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(n.cgroup, "cpuset.cpus.effective"), []byte(cpus+"\n"), 0o644))
}

// TestWidenedWhileRootShrunkKeepsEmptyOriginal: "system" (empty original,
// has tasks) is released while CPU 6 is offline or in a partition:
// widened to the root's 0-5. CPU 6 comes back; the next process confines
// it and records the empty original, and its release, once "system" has
// no tasks, writes the empty list back.
func TestWidenedWhileRootShrunkKeepsEmptyOriginal(t *testing.T) {
	n := newNode(t)
	p := n.start(t, n.housekeepingFS(populatedFS{}), 1)
	p.keep.set(cpuset.New(5))
	require.NoError(t, p.r.Flush())
	require.Equal(t, "0-4,6-7", n.read(t, "system/cpuset.cpus"))

	n.rootEffective(t, "0-5")
	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	require.Equal(t, "0-5", n.read(t, "system/cpuset.cpus"), "widened to the root's CPUs of the moment")
	p.r.Close()

	n.rootEffective(t, "0-6")
	q := n.start(t, n.housekeepingFS(hostfiles.OS{}), 1)
	q.keep.set(cpuset.New(5))
	require.NoError(t, q.r.Flush())
	rec, ok := n.journaled(t, "system/cpuset.cpus")
	require.True(t, ok)
	assert.Equal(t, "", rec.Original, "the plugin's own widened list is not an administrator's original")
	q.keep.set(cpuset.New())
	require.NoError(t, q.r.Flush())
	assert.Equal(t, "", n.read(t, "system/cpuset.cpus"), "no tasks: the empty list back")
	_, left := n.journaled(t, "system/cpuset.cpus")
	assert.False(t, left)
}

// TestRestartWithCPUOfflineKeepsEmptyOriginal: "system" was widened to
// the root's 0-6; the next confinement happens while CPU 6 is offline (or
// in a partition of a running exclusive container): the original stays
// the empty list, which the release gives back once "system" has no tasks.
func TestRestartWithCPUOfflineKeepsEmptyOriginal(t *testing.T) {
	n := newNode(t)
	p := n.start(t, n.housekeepingFS(populatedFS{}), 1)
	p.keep.set(cpuset.New(5, 6))
	require.NoError(t, p.r.Flush())
	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	require.Equal(t, "0-6", n.read(t, "system/cpuset.cpus"))
	p.r.Close()

	n.rootEffective(t, "0-5")
	q := n.start(t, n.housekeepingFS(hostfiles.OS{}), 1)
	q.keep.set(cpuset.New(5))
	require.NoError(t, q.r.Flush())
	rec, ok := n.journaled(t, "system/cpuset.cpus")
	require.True(t, ok)
	assert.Equal(t, "", rec.Original, "the widened list stands for the empty one")
	n.rootEffective(t, "0-6")
	q.keep.set(cpuset.New())
	require.NoError(t, q.r.Flush())
	assert.Equal(t, "", n.read(t, "system/cpuset.cpus"), "no tasks: the empty list back")
}

// TestAdminListEqualToShrunkRootKept: "user" was pinned by its
// administrator to 0-5. The plugin confines it while CPU 6 is out of the
// root's CPUs (offline, or an isolated partition of an exclusive
// container; CPU 7 is "part"'s): 0-5 is its original, restored exactly,
// not taken as the empty list (which would give it CPU 6 back later).
func TestAdminListEqualToShrunkRootKept(t *testing.T) {
	n := newNode(t)
	n.rootEffective(t, "0-5")
	p := n.start(t, n.housekeepingFS(hostfiles.OS{}), 1)
	p.keep.set(cpuset.New(5))
	require.NoError(t, p.r.Flush())
	rec, ok := n.journaled(t, "user/cpuset.cpus")
	require.True(t, ok)
	assert.Equal(t, "0-5", rec.Original, "an administrator's explicit list is its original")
	n.rootEffective(t, "0-6")
	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-5", n.read(t, "user/cpuset.cpus"), "restored exactly")
}

// TestKillAtEveryWriteKeepsWidenedEmptyOriginal: a life of a populated
// "system" confined, released (widened), confined again and released,
// killed at every mutating step (the refused empty write included, just
// before and just after each): the next process on a node where "system"
// still has tasks leaves it widened with its empty original recorded, and
// one after it, once "system" has no tasks, gives every file its original
// exactly and leaves the journal empty.
func TestKillAtEveryWriteKeepsWidenedEmptyOriginal(t *testing.T) {
	life := []cpuset.CPUSet{cpuset.New(6, 7), cpuset.New(), cpuset.New(5), cpuset.New()}
	play := func(n *node, fsys *crashfs.FS) {
		p := n.start(t, n.housekeepingFS(fsys), 1)
		for _, held := range life {
			p.keep.set(held)
			_ = p.r.Flush()
			if fsys.Crashed() {
				return
			}
		}
		p.r.Close()
	}
	clean := &crashfs.FS{Inner: populatedFS{}}
	play(newNode(t), clean)
	steps := clean.Mutations()
	require.Greater(t, steps, 6)
	for k := 1; k <= steps; k++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("write %d, after %v", k, after), func(t *testing.T) {
				n := newNode(t)
				fsys := &crashfs.FS{Inner: populatedFS{}, CrashAt: k, After: after}
				play(n, fsys)
				require.True(t, fsys.Crashed())

				p := n.start(t, n.housekeepingFS(populatedFS{}), 1)
				require.NoError(t, p.r.Flush())
				if rec, ok := n.journaled(t, "system/cpuset.cpus"); ok {
					assert.Equal(t, "", rec.Original)
					assert.Equal(t, "0-6", n.read(t, "system/cpuset.cpus"), "widened")
				}
				assert.Empty(t, p.r.Status().Failures)
				p.r.Close()

				q := n.start(t, n.housekeepingFS(hostfiles.OS{}), 1)
				require.NoError(t, q.r.Flush())
				assert.Equal(t, originals, n.files(t), "every file exactly as it was")
				records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
				require.NoError(t, err)
				assert.Empty(t, records)
			})
		}
	}
}
