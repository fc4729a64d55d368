package plugin

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestClassCPUListsAtRandom: the state file's power classes, listed by
// walking the CPUs in order, are what building each class's set and
// printing it (cpuset.CPUSet.String, which the file held before) gives,
// whatever the classes and their runs of CPUs.
func TestClassCPUListsAtRandom(t *testing.T) {
	r := rand.New(rand.NewSource(45))
	for step := 0; step < 2000; step++ {
		classes := map[int]string{}
		for cpu := range r.Intn(400) {
			if r.Intn(4) > 0 {
				classes[cpu] = []string{"turbo", "idle", "infra", "x"}[r.Intn(r.Intn(4)+1)]
			}
		}
		want := map[string]string{}
		byClass := map[string][]int{}
		for cpu, class := range classes {
			byClass[class] = append(byClass[class], cpu)
		}
		for class, cpus := range byClass {
			want[class] = cpuset.New(cpus...).String()
		}
		require.Equal(t, want, classCPULists(classes), "step %d", step)
	}
	require.Empty(t, classCPULists(nil))
}

// TestClassCPUListsAllocatesPerClass: listing 384 CPUs of three classes
// allocates per class, not per CPU (it is done under the plugin's lock at
// every state write).
func TestClassCPUListsAllocatesPerClass(t *testing.T) {
	classes := map[int]string{}
	for cpu := range 384 {
		classes[cpu] = []string{"turbo", "idle", "infra"}[cpu%7%3]
	}
	allocs := testing.AllocsPerRun(20, func() { classCPULists(classes) })
	t.Logf("%.0f allocations", allocs)
	require.Less(t, allocs, 40.0)
}
