package hostfiles

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// killScenario is a life of changes: files wanted in turn, each derived
// from its original (so a want computed from an already changed file, or
// an original lost, shows as a wrong value). Before a step's pass, setup
// sets the kernel's answers: in the first step IRQ 28 is refused with
// EINVAL (a conflict that goes away) and IRQ 29 fails with ENOSPC (the
// pass backs off); in the second both succeed, 28 on its retry a Rescan
// later, with the same wants.
var killScenario = []struct {
	files  []string
	suffix string
	setup  func(fsys *faultFS, tr *tree, clock *fakeClock)
}{
	{[]string{"irq/24/smp_affinity_list", "irq/25/smp_affinity_list", "irq/28/smp_affinity_list", "irq/29/smp_affinity_list", "irq/default_smp_affinity"}, "+1",
		func(fsys *faultFS, tr *tree, _ *fakeClock) {
			fsys.setErr(tr.path("irq/28/smp_affinity_list"), pathErr(tr.path("irq/28/smp_affinity_list"), syscall.EINVAL))
			fsys.setErr(tr.path("irq/29/smp_affinity_list"), pathErr(tr.path("irq/29/smp_affinity_list"), syscall.ENOSPC))
		}},
	{[]string{"irq/24/smp_affinity_list", "irq/25/smp_affinity_list", "irq/28/smp_affinity_list", "irq/29/smp_affinity_list", "irq/default_smp_affinity"}, "+1",
		func(fsys *faultFS, tr *tree, clock *fakeClock) {
			fsys.setErr(tr.path("irq/28/smp_affinity_list"), nil)
			fsys.setErr(tr.path("irq/29/smp_affinity_list"), nil)
			clock.advance(DefaultTiming.Rescan)
		}},
	{[]string{"irq/25/smp_affinity_list", "irq/26/smp_affinity_list", "irq/default_smp_affinity"}, "+2", nil},
	{nil, "", nil},
}

// killDevices are the identities of the kill files' objects: the device
// of each IRQ (after a new device got IRQ 26, when reused names it).
func killDevices(tr *tree, reused string) map[string]string {
	ids := map[string]string{}
	for f := range killFiles {
		ids[tr.path(f)] = "device of " + f
	}
	if reused != "" {
		ids[tr.path(reusedIRQ)] = reused
	}
	return ids
}

// reusedIRQ is the file whose IRQ number the kernel gives to another
// device while the plugin is dead, and newDefault that device's affinity.
const (
	reusedIRQ  = "irq/26/smp_affinity_list"
	newDefault = "0-7"
)

// killFiles are the files' originals. etc/shadow and outside/secret lie
// outside the roots (the IRQ directory), and the journal the scenario
// starts from names them (killTree): they must never change.
var killFiles = map[string]string{
	"irq/24/smp_affinity_list": "0-7", "irq/25/smp_affinity_list": "2", "irq/26/smp_affinity_list": "5-6",
	"irq/27/smp_affinity_list": "0-7", "irq/28/smp_affinity_list": "0-7", "irq/29/smp_affinity_list": "0-7",
	"irq/30/smp_affinity_list": "0-7", "irq/default_smp_affinity": "ff",
	"etc/shadow": "secret", "outside/secret": "secret",
}

// killTree is the files of killFiles as an earlier process of another
// version left them, with a damaged journal: IRQ 30 changed by an owner
// this build lacks ("ghost"), which must be restored, and records of a
// file outside the roots and of one reached through a symlink out of
// them, which must not be.
func killTree(t *testing.T) (tr *tree, untrusted []string) {
	t.Helper()
	tr = newTree(t, killFiles)
	require.NoError(t, os.WriteFile(tr.path("irq/30/smp_affinity_list"), []byte("7\n"), 0o644))
	require.NoError(t, os.Symlink(tr.path("outside"), tr.path("irq/99")))
	untrusted = []string{tr.path("etc/shadow"), tr.path("irq/99/secret")}
	damagedJournal(t, tr, map[string]Record{
		tr.path("irq/30/smp_affinity_list"): {Original: "0-7", Owner: "ghost"},
		untrusted[0]:                        {Original: "pwned", Owner: "irq"},
		untrusted[1]:                        {Original: "pwned", Owner: "irq"},
	})
	return tr, untrusted
}

// killInstance is a process of the scenario: confined to the IRQ files.
func killInstance(t *testing.T, fsys FS, tr *tree, src Source) (*instance, *fakeClock) {
	t.Helper()
	in := openInstance(t, fsys, tr, bootA, src)
	in.r.RestoreOnlyUnder(tr.path("irq"))
	return in, withClock(in.r)
}

// runScenario plays the scenario until the process dies; it returns the
// step it died in (len(killScenario) if it did not).
func runScenario(t *testing.T, fsys *faultFS, tr *tree) int {
	t.Helper()
	src := newSource("irq")
	src.identify(killDevices(tr, ""))
	in, clock := killInstance(t, fsys, tr, src)
	for i, step := range killScenario {
		if step.setup != nil {
			step.setup(fsys, tr, clock)
		}
		src.derive(names(tr, step.files...), step.suffix)
		_ = in.r.Flush() // a dead process's errors reach no one
		if fsys.crashed {
			return i
		}
	}
	return len(killScenario)
}

// TestKillAtEveryStep kills the process at every mutating step of the
// scenario (just before the step, and just after it), then starts a new
// process on the same files and journal. Whatever the step, the new
// process puts every file back to exactly its original, and applies a
// want computed from the originals, never from a changed value. The
// scenario has a refusal that later succeeds (EINVAL), a pass that fails
// and backs off (ENOSPC), a record of an owner no Source claims, and
// records outside the roots, which no process ever writes.
func TestKillAtEveryStep(t *testing.T) {
	clean := &faultFS{}
	tr, untrusted := killTree(t)
	require.Equal(t, len(killScenario), runScenario(t, clean, tr))
	tr.requireOriginals(t, "uninterrupted run")
	require.Equal(t, slices.Sorted(slices.Values(untrusted)), slices.Sorted(maps.Keys(onDisk(t, tr))), "only the untrusted records are left")
	require.Equal(t, 3, clean.writesTo(tr.path("irq/28/smp_affinity_list")), "IRQ 28: refused, written on its retry a Rescan later, restored")
	require.Equal(t, 3, clean.writesTo(tr.path("irq/29/smp_affinity_list")), "IRQ 29: failed, written on the retry, restored")
	steps := clean.mutations
	t.Logf("the scenario makes %d mutating steps:\n%s", steps, fmtOps(clean.ops))
	require.Greater(t, steps, 10)

	for k := 1; k <= steps; k++ {
		for _, after := range []bool{false, true} {
			for _, recovery := range []string{"release all", "want again", "IRQ 26 reused"} {
				name := fmt.Sprintf("step %d %s, %s", k, map[bool]string{false: "before", true: "after"}[after], recovery)
				t.Run(name, func(t *testing.T) {
					tr, untrusted := killTree(t)
					fsys := &faultFS{crashAt: k, afterOp: after}
					died := runScenario(t, fsys, tr)
					require.True(t, fsys.crashed, "died at step %d", k)

					src := newSource("irq")
					src.identify(killDevices(tr, ""))
					if recovery == "IRQ 26 reused" {
						// The kernel freed IRQ 26 and gave it to another
						// device, with the default affinity: that is the
						// file's original now, whatever the old device's
						// was or the plugin had written.
						require.NoError(t, os.WriteFile(tr.path(reusedIRQ), []byte(newDefault+"\n"), 0o644))
						src.identify(killDevices(tr, "nvme0q3"))
						tr.files = maps.Clone(tr.files)
						tr.files[reusedIRQ] = newDefault
					}
					next, _ := killInstance(t, OS{}, tr, src)
					if recovery == "want again" && died < len(killScenario) {
						step := killScenario[died]
						src.derive(names(tr, step.files...), step.suffix)
						require.NoError(t, next.r.Flush())
						for _, f := range step.files {
							assert.Equal(t, killFiles[f]+step.suffix, tr.read(t, f), "%s wanted from its original", f)
						}
						for f, orig := range killFiles {
							if !slices.Contains(step.files, f) {
								assert.Equal(t, orig, tr.read(t, f), "%s not wanted: original", f)
							}
						}
					}
					src.derive(nil, "")
					require.NoError(t, next.r.Flush())
					tr.requireOriginals(t, name)
					assert.Equal(t, slices.Sorted(slices.Values(untrusted)), slices.Sorted(maps.Keys(onDisk(t, tr))), "no record left but the untrusted ones")
				})
			}
		}
	}
}
