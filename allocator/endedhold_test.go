package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
)

// A re-add refused before anything is committed puts the hold it ended
// back (putBack), as a kept-but-not-grown adoption does after its undo: a
// restore (Adopt's stay, Readmit's kept where it runs) of the container
// on a set with a CPU outside its pool (1, the exclusive pool's) ends the
// hold of its last run, with its hugepages and its bound claim, before it
// checks the set; refused, the allocator must be as it was.
func TestRefusedRestoreLeavesTheAllocatorAsItFoundIt(t *testing.T) {
	a, req := keptNotGrownTwin(t)
	before := stateSnapshot(a)
	_, err := a.restore(Assignment{ID: req.ID, Pod: req.Pod, Container: req.Container, Pool: req.Pool, MilliCPU: 2000,
		CPUs: set(t, "1-2"), Reserved: cpuset.New(),
		Memory: []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 24}}}}})
	require.ErrorContains(t, err, "CPU 1")
	assertSameState(t, before, stateSnapshot(a))
	assert.NoError(t, a.mem.Verify())
}
