package allocator

import (
	"k8s.io/utils/cpuset"
)

// planner evaluates candidate placements for one request.
type planner struct {
	a    *Allocator
	mode mode
	tpc  int
	// self and home are set when a running container grows: its own
	// threads complete a core rather than share it, and its NUMA nodes
	// are where the new CPUs belong.
	self        string
	home        cpuset.CPUSet
	homeSockets []int
	// s is the allocator's working memory, reused by every decision.
	s *scratch
}

// forEachCombination calls fn with every k-subset of 0..n-1 in
// lexicographic order.
func forEachCombination(n, k int, fn func([]int)) {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	for {
		fn(idx)
		i := k - 1
		for i >= 0 && idx[i] == n-k+i {
			i--
		}
		if i < 0 {
			return
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}
