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

// Set is the housekeeping set: the online CPUs less the kept ones, with
// never fewer than floor CPUs where host processes run, which leaves out
// the isolated ones (isolcpus=domain: PID 1's affinity leaves them out,
// and every process inherits it), unless every online CPU is isolated.
// When fewer would be left, kept CPUs that are not isolated are given
// back, the lowest idle ones first, then the lowest held ones, until
// floor are (or every such CPU is: the floor is then more than the node
// can give); widened is what was given back. An isolated kept CPU is
// never given back for the floor: no host process would run there.
func Set(online, isolated cpuset.CPUSet, kept Kept, floor int) (set, widened cpuset.CPUSet) {
	if online.Difference(isolated).IsEmpty() {
		isolated = cpuset.New()
	}
	idle := kept.Idle.Intersection(online).Difference(kept.Held)
	held := kept.Held.Intersection(online)
	set = online.Difference(idle).Difference(held)
	have := set.Difference(isolated).Size()
	var back []int
	for _, from := range []cpuset.CPUSet{idle, held} {
		for _, c := range from.Difference(isolated).List() {
			if have+len(back) >= floor {
				break
			}
			back = append(back, c)
		}
	}
	widened = cpuset.New(back...)
	return set.Union(widened), widened
}
