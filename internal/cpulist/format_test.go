package cpulist

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestFormatAsString: Format writes every set as cpuset's String does
// (the state file, the adjustment and the logs carry what String wrote
// before), with at most two allocations.
func TestFormatAsString(t *testing.T) {
	sets := []cpuset.CPUSet{
		cpuset.New(), cpuset.New(0), cpuset.New(7), cpuset.New(0, 1), cpuset.New(0, 2), cpuset.New(0, 1, 2, 4),
		cpuset.New(3, 5, 6, 7, 9), cpuset.New(1023), cpuset.New(100, 101, 8191),
	}
	r := rand.New(rand.NewPCG(45, 56))
	for range 2000 {
		var ids []int
		limit := 1 + r.IntN(1024)
		for range r.IntN(400) {
			ids = append(ids, r.IntN(limit))
		}
		sets = append(sets, cpuset.New(ids...))
	}
	all := make([]int, 384)
	for i := range all {
		all[i] = i
	}
	sets = append(sets, cpuset.New(all...))
	for _, s := range sets {
		require.Equal(t, s.String(), Format(s), "set %v", s.List())
	}
	two := cpuset.New(4, 5, 200, 201)
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { _ = Format(two) }), 2.0)
}
