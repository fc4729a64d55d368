package housekeeping

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/crashfs"
)

// killLife is a life of grants and releases, with the files each step
// leaves (derived from the originals, so a want computed from an already
// changed file shows as a wrong value).
var killLife = []struct {
	held  cpuset.CPUSet
	files map[string]string
}{
	{cpuset.New(6, 7), with(map[string]string{"wq": "3e", "system/cpuset.cpus": "0-5"})},
	{cpuset.New(5, 6, 7), with(map[string]string{"wq": "1e", "system/cpuset.cpus": "0-4", "user/cpuset.cpus": "0-4"})},
	{cpuset.New(7), with(map[string]string{"wq": "7e", "system/cpuset.cpus": "0-6", "pinned/cpuset.cpus": "6"})},
	{cpuset.New(), originals},
}

// live plays the life until the process dies; it returns the step it
// died in (len(killLife) if it did not).
func live(t *testing.T, n *node, fsys *crashfs.FS) int {
	t.Helper()
	p := n.start(t, fsys, 1)
	for i, step := range killLife {
		p.keep.set(step.held)
		_ = p.r.Flush() // a dead process's errors reach no one
		if fsys.Crashed() {
			return i
		}
		require.Equal(t, step.files, n.files(t), "step %d", i)
	}
	return len(killLife)
}

// TestKillAtEveryWrite kills the process at every mutating step of the
// life (a journal write or a host file's, just before it and just after
// it), then starts another on the same files and journal: one without
// the feature (nothing kept) puts every file back exactly; one that keeps
// what the dead one was keeping gets the files that want gives from the
// originals, and exactly the originals once it releases.
func TestKillAtEveryWrite(t *testing.T) {
	clean := &crashfs.FS{}
	require.Equal(t, len(killLife), live(t, newNode(t), clean))
	steps := clean.Mutations()
	require.Greater(t, steps, 8)

	for k := 1; k <= steps; k++ {
		for _, after := range []bool{false, true} {
			for _, recovery := range []string{"without the feature", "keeps the same CPUs"} {
				t.Run(fmt.Sprintf("write %d %s, %s", k, map[bool]string{false: "before", true: "after"}[after], recovery), func(t *testing.T) {
					n := newNode(t)
					fsys := &crashfs.FS{CrashAt: k, After: after}
					died := live(t, n, fsys)
					require.True(t, fsys.Crashed())

					p := n.start(t, hostfiles.OS{}, 1)
					if recovery == "keeps the same CPUs" {
						p.keep.set(killLife[died].held)
						require.NoError(t, p.r.Flush())
						assert.Equal(t, killLife[died].files, n.files(t), "from the originals")
						p.keep.set(cpuset.New())
					}
					require.NoError(t, p.r.Flush())
					assert.Equal(t, originals, n.files(t), "every file exactly as it was")
					records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
					require.NoError(t, err)
					assert.Empty(t, records)
				})
			}
		}
	}
}
