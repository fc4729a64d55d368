package housekeeping

import (
	"k8s.io/utils/cpuset"
)

// Kept is what the pools keep host processes off, for one pass.
type Kept struct {
	// Held are CPUs containers hold (and holds for their stopped runs).
	Held cpuset.CPUSet
	// Idle are CPUs of pools kept always that no container holds: given
	// back before Held when the floor needs CPUs.
	Idle cpuset.CPUSet
}

// Empty tells whether nothing is kept.
func (k Kept) Empty() bool { return k.Held.IsEmpty() && k.Idle.IsEmpty() }

// Set is the housekeeping set: the online CPUs less the kept ones, never
// fewer than floor. When fewer would be left, kept CPUs are given back,
// the lowest idle ones first, then the lowest held ones, until floor are
// (or every online CPU is); widened is what was given back.
func Set(online cpuset.CPUSet, kept Kept, floor int) (set, widened cpuset.CPUSet) {
	idle := kept.Idle.Intersection(online).Difference(kept.Held)
	held := kept.Held.Intersection(online)
	set = online.Difference(idle).Difference(held)
	var back []int
	for _, from := range []cpuset.CPUSet{idle, held} {
		for _, c := range from.List() {
			if set.Size()+len(back) >= floor {
				break
			}
			back = append(back, c)
		}
	}
	widened = cpuset.New(back...)
	return set.Union(widened), widened
}
