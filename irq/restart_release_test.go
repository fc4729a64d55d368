package irq

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// TestReleasedCPUGetsIRQsBackAfterARestart: a process bans CPUs 2 and 3
// and is replaced (an upgrade, a kill -9); the next one bans 3 only. The
// IRQs the earlier process narrowed to 0-1,4-7 still avoid 3, and only
// the journal says that the value is the plugin's own write for a ban
// that is gone: each must become its original less 3. Before, only the
// writes of the running process were known as its own, and CPU 2 got no
// IRQ back until a ban touched the IRQ or nothing was banned. A value
// irqbalance wrote after the plugin's write is still its business.
func TestReleasedCPUGetsIRQsBackAfterARestart(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, "")
	before := n.affinities(spec)
	n.ban(2, 3)
	require.Equal(t, "0-1,4-7", n.affinity("24"))
	n.setAffinity("0", "5") // irqbalance's placement within the allowed CPUs
	n.r.Close()
	n.start("") // a new process, from the same journal
	n.ban(3)
	assert.Equal(t, "0-2,4-7", n.affinity("24"), "CPU 2 is released: its IRQs may run there again")
	assert.Equal(t, "2", n.affinity("28"), "its original less 3")
	assert.Equal(t, "0-2,4-7", n.affinity("27"), "pinned to 3 alone: every free CPU, now with 2")
	assert.Equal(t, "5", n.affinity("0"), "another program's value that avoids the ban is its business")
	writes := n.r.Status().Writes
	require.NoError(t, n.r.Flush())
	assert.Equal(t, writes, n.r.Status().Writes, "a pass with the same ban writes nothing")
	n.ban()
	after := n.affinities(spec)
	before["0"] = after["0"] // irqbalance's value; its original is restored below
	assert.Equal(t, before, after, "every affinity restored exactly")
}

// TestKilledBetweenRecordAndWriteRestoresNothingWrong: the plugin's own
// write is recorded before it is made; a process killed in between
// leaves a journal that names a value the file never took. The next
// process must take the file for what it holds (here the original): an
// IRQ whose original avoids the new ban keeps it, one that does not gets
// the new ban's want, and with nothing banned every file holds exactly
// its original.
func TestKilledBetweenRecordAndWriteRestoresNothingWrong(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, "")
	before := n.affinities(spec)
	// The writes of IRQs 24 and 26 fail after their records were made:
	// as a kill -9 between the journal's write and the affinity's.
	n.fs.managed(n.proc, "24", syscall.EBUSY)
	n.fs.managed(n.proc, "26", syscall.EBUSY)
	n.src.SetBanned(cpuset.New(2, 3, 6))
	require.Error(t, n.r.Flush())
	require.Equal(t, "0-7", n.affinity("24"), "not written")
	require.Equal(t, "6", n.affinity("26"), "not written")
	n.r.Close()
	n.fs.refuse = map[string]syscall.Errno{}
	n.start("")
	n.ban(3)
	assert.Equal(t, "0-2,4-7", n.affinity("24"), "the original less 3")
	assert.Equal(t, "6", n.affinity("26"), "its original avoids 3: left as it is")
	assert.Equal(t, "0-2,4-7", n.affinity("0"), "written by the first process, for 2,3,6: now its original less 3")
	n.ban()
	assert.Equal(t, before, n.affinities(spec), "every affinity restored exactly")
	assert.Empty(t, n.r.Status().Records[Owner])
}

// TestJournalWithoutOwnWritesBehavesAsBefore: a journal written by a
// build that did not record the plugin's own writes (no wrote, no mark)
// says nothing of whose value an IRQ holds: the next process judges it
// as that build did (any value avoiding the ban is kept), and still
// restores every original exactly when nothing is banned.
func TestJournalWithoutOwnWritesBehavesAsBefore(t *testing.T) {
	spec := twoNodes()
	n := newNode(t, spec, "")
	before := n.affinities(spec)
	n.ban(2, 3)
	n.r.Close()
	path := hostfiles.JournalPath(n.state)
	records, _, _, err := hostfiles.ReadJournal(path, boot)
	require.NoError(t, err)
	for p, r := range records {
		if filepath.Base(p) == "smp_affinity_list" {
			require.NotEmpty(t, r.Mark, "this build marks its IRQ writes: %s", p)
		}
		r.Wrote, r.Mark = "", ""
		records[p] = r
	}
	require.NoError(t, os.Remove(path))
	j, _, err := hostfiles.OpenJournal(n.fs, path, boot)
	require.NoError(t, err)
	require.NoError(t, j.Commit(records, nil))
	n.start("")
	n.ban(3)
	assert.Equal(t, "0-1,4-7", n.affinity("24"), "an old journal: the value avoids 3 and is kept, as before")
	n.ban()
	assert.Equal(t, before, n.affinities(spec), "every affinity restored exactly")
}

// TestTightensOnlyWhenACPUIsBannedAnew: the reconciler starts a pass
// sooner than its spacing only for a CPU banned that the last plan did
// not ban (a new exclusive container's CPUs take device IRQs until it);
// a release or the same ban does not.
func TestTightensOnlyWhenACPUIsBannedAnew(t *testing.T) {
	n := newNode(t, twoNodes(), "")
	assert.False(t, n.src.Tightens(), "nothing banned")
	n.src.SetBanned(cpuset.New(2, 3))
	assert.True(t, n.src.Tightens(), "2 and 3 banned anew")
	require.NoError(t, n.r.Flush())
	assert.False(t, n.src.Tightens(), "planned")
	n.src.SetBanned(cpuset.New(3))
	assert.False(t, n.src.Tightens(), "a release")
	require.NoError(t, n.r.Flush())
	n.src.SetBanned(cpuset.New(3, 5))
	assert.True(t, n.src.Tightens(), "5 banned anew")
}
