package kernelwork

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/crashfs"
)

// killLife is a life of grants and releases, with the masks each step
// leaves (derived from the originals, so a want computed from an already
// changed mask shows as a wrong value).
var killLife = []struct {
	held  cpuset.CPUSet
	files map[string]string
}{
	{cpuset.New(2, 3), with(map[string]string{"eth0 rx-0": "73", "eth0 rx-1": "73", "veth1a2 rx-0": "73", "wq": "73", "wq writeback": "f3", "wq nvme-wq": "73"})},
	{cpuset.New(3, 6), with(map[string]string{"eth0 rx-0": "37", "eth0 rx-1": "04", "veth1a2 rx-0": "37", "wq": "37", "wq writeback": "b7", "wq nvme-wq": "04"})},
	{cpuset.New(0), with(map[string]string{"eth0 rx-0": "7e", "veth1a2 rx-0": "7e", "wq": "7e", "wq writeback": "fe"})},
	{cpuset.New(), originals},
}

// live plays the life until the process dies; it returns the step it
// died in (len(killLife) if it did not).
func live(t *testing.T, n *node, fsys *crashfs.FS) int {
	t.Helper()
	p := n.start(t, fsys, true)
	for i, step := range killLife {
		p.held.set(step.held)
		_ = p.r.Flush() // a dead process's errors reach no one
		if fsys.Crashed() {
			return i
		}
		require.Equal(t, step.files, n.files(t), "step %d", i)
	}
	return len(killLife)
}

// TestKillAtEveryWrite kills the process at every mutating step of the
// life (a journal write or a mask's, just before it and just after it),
// then starts another on the same files and journal: one with the knobs
// off (nothing held) puts every mask back exactly; one that holds what the
// dead one held gets the masks that want from the originals, and exactly
// the originals once it releases; one that starts after the pod's veth
// went away drops its record and restores the rest.
func TestKillAtEveryWrite(t *testing.T) {
	clean := &crashfs.FS{}
	require.Equal(t, len(killLife), live(t, newNode(t), clean))
	steps := clean.Mutations()
	require.Greater(t, steps, 12)

	for k := 1; k <= steps; k++ {
		for _, after := range []bool{false, true} {
			for _, recovery := range []string{"knobs off", "holds the same CPUs", "the veth went away"} {
				t.Run(fmt.Sprintf("write %d %s, %s", k, map[bool]string{false: "before", true: "after"}[after], recovery), func(t *testing.T) {
					n := newNode(t)
					fsys := &crashfs.FS{CrashAt: k, After: after}
					died := live(t, n, fsys)
					require.True(t, fsys.Crashed())

					want := originals
					if recovery == "the veth went away" {
						n.removeDevice(t, "veth1a2")
						want = with(nil)
						delete(want, "veth1a2 rx-0")
					}
					p := n.start(t, hostfiles.OS{}, true)
					if recovery == "holds the same CPUs" {
						p.held.set(killLife[died].held)
						require.NoError(t, p.r.Flush())
						assert.Equal(t, killLife[died].files, n.files(t), "from the originals")
						p.held.set(cpuset.New())
					}
					require.NoError(t, p.r.Flush())
					got := map[string]string{}
					for name := range want {
						got[name] = n.read(t, name)
					}
					assert.Equal(t, want, got, "every mask exactly as it was")
					assert.Empty(t, n.journal(t))
				})
			}
		}
	}
}
