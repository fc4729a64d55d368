package hostfiles

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// killScenario is a life of changes: files wanted in turn, each derived
// from its original (so a want computed from an already changed file, or
// an original lost, shows as a wrong value).
var killScenario = []struct {
	files  []string
	suffix string
}{
	{[]string{"irq/24/smp_affinity_list", "irq/25/smp_affinity_list", "irq/default_smp_affinity"}, "+1"},
	{[]string{"irq/25/smp_affinity_list", "irq/26/smp_affinity_list", "irq/default_smp_affinity"}, "+2"},
	{nil, ""},
}

var killFiles = map[string]string{
	"irq/24/smp_affinity_list": "0-7", "irq/25/smp_affinity_list": "2", "irq/26/smp_affinity_list": "5-6",
	"irq/27/smp_affinity_list": "0-7", "irq/default_smp_affinity": "ff",
}

// runScenario plays the scenario until the process dies; it returns the
// step it died in (len(killScenario) if it did not).
func runScenario(t *testing.T, fsys *faultFS, tr *tree) int {
	t.Helper()
	src := newSource("irq")
	in := openInstance(t, fsys, tr, bootA, src)
	for i, step := range killScenario {
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
// want computed from the originals, never from a changed value.
func TestKillAtEveryStep(t *testing.T) {
	clean := &faultFS{}
	tr := newTree(t, killFiles)
	require.Equal(t, len(killScenario), runScenario(t, clean, tr))
	tr.requireOriginals(t, "uninterrupted run")
	steps := clean.mutations
	t.Logf("the scenario makes %d mutating steps:\n%s", steps, fmtOps(clean.ops))
	require.Greater(t, steps, 10)

	for k := 1; k <= steps; k++ {
		for _, after := range []bool{false, true} {
			for _, recovery := range []string{"release all", "want again"} {
				name := fmt.Sprintf("step %d %s, %s", k, map[bool]string{false: "before", true: "after"}[after], recovery)
				t.Run(name, func(t *testing.T) {
					tr := newTree(t, killFiles)
					fsys := &faultFS{crashAt: k, afterOp: after}
					died := runScenario(t, fsys, tr)
					require.True(t, fsys.crashed, "died at step %d", k)

					src := newSource("irq")
					next := openInstance(t, OS{}, tr, bootA, src)
					if recovery == "want again" && died < len(killScenario) {
						step := killScenario[died]
						src.derive(names(tr, step.files...), step.suffix)
						require.NoError(t, next.r.Flush())
						for _, f := range step.files {
							assert.Equal(t, killFiles[f]+step.suffix, tr.read(t, f), "%s wanted from its original", f)
						}
						for f, orig := range killFiles {
							if !contains(step.files, f) {
								assert.Equal(t, orig, tr.read(t, f), "%s not wanted: original", f)
							}
						}
					}
					src.derive(nil, "")
					require.NoError(t, next.r.Flush())
					tr.requireOriginals(t, name)
					assert.Empty(t, onDisk(t, tr), "no record left")
				})
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
