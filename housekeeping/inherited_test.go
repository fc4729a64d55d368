package housekeeping

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// TestSingleCPUNeverWidened (issue 41, item 8): with minInfraCPUs 1 and
// every CPU but 0 held, the housekeeping set is {0}. A thread allowed on
// CPU 0 alone (an administrator's taskset -c 0), there before the plugin
// started or forked while the set was {0}, cannot be told from one that
// inherited the confinement: it is its own choice, and it is never
// widened on release.
func TestSingleCPUNeverWidened(t *testing.T) {
	n, k := threadNode(t, true)
	n.addThread(t, k, fakeThread{pid: 600, tid: 600, comm: "taskset -c 0", start: 600, cgroup: v1System, affinity: "0"})
	p := n.startThreads(t, k, nil)
	p.keep.set(cpuset.New(1, 2, 3, 4, 5, 6, 7))
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0", k.affinities()[600])
	assert.Equal(t, "0", k.affinities()[2], "kthreadd narrowed to the set")

	// Forked since the last pass, with exactly the set: inherited or
	// chosen, no one can tell.
	n.addThread(t, k, fakeThread{pid: 601, tid: 601, comm: "taskset -c 0 later", start: 601, cgroup: v1System, affinity: "0"})
	require.NoError(t, p.r.Flush())
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.NotContains(t, records, AffinityPath(600, 600), "nothing to restore: never changed")
	assert.NotContains(t, records, AffinityPath(601, 601), "nothing to restore: never changed")

	p.keep.set(cpuset.New())
	require.NoError(t, p.r.Flush())
	assert.Equal(t, affinitiesWith(map[int]string{600: "0", 601: "0"}), k.affinities(),
		"released: the threads allowed on CPU 0 alone stay there, every other one as it was")
}

// TestOwnChoiceBeforeConfinement (issue 41, item 8): a process an
// administrator pinned to 0-1 before anything was confined, which is
// exactly the housekeeping set, did not inherit a confinement: on the
// first pass of a plugin whose journal holds no thread (nothing was
// confined before it), and on the first pass of a restarted one (it was
// there when the earlier one last looked, and the journal does not hold
// it), it keeps 0-1 on release. A process forked after the earlier
// plugin's last pass with exactly the set did inherit it: widened.
func TestOwnChoiceBeforeConfinement(t *testing.T) {
	n, k := threadNode(t, true)
	n.addThread(t, k, fakeThread{pid: 600, tid: 600, comm: "taskset -c 0-1", start: 600, cgroup: v1System, affinity: "0-1"})
	held := cpuset.New(2, 3, 4, 5, 6, 7)
	p := n.startThreads(t, k, nil)
	p.keep.set(held)
	require.NoError(t, p.r.Flush())
	assert.Equal(t, "0-1", k.affinities()[600])
	assert.Equal(t, "0-1", k.affinities()[2], "kthreadd narrowed to the set")
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.NotContains(t, records, AffinityPath(600, 600), "its own choice: nothing to restore")

	// The plugin dies (kill -9, or a restart keeping the CPUs held); a
	// child is forked in the meantime, with the set its parent had.
	p.r.Close()
	n.addThread(t, k, fakeThread{pid: 700, tid: 700, comm: "cron child", start: 5000, cgroup: v1System, affinity: "0-1"})
	q := n.startThreads(t, k, nil)
	q.keep.set(held)
	require.NoError(t, q.r.Flush())
	assert.Equal(t, "0-1", k.affinities()[600])
	assert.Equal(t, "0-1", k.affinities()[700])

	q.keep.set(cpuset.New())
	require.NoError(t, q.r.Flush())
	assert.Equal(t, affinitiesWith(map[int]string{600: "0-1", 700: "0-7"}), k.affinities(),
		"released: the administrator's choice kept, the child widened, every other thread as it was")
	records, _, _, err = hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Empty(t, records)
}
