package cpulist

import (
	"strconv"

	"k8s.io/utils/cpuset"
)

// Format writes set in the list format, exactly as set.String() does
// ("0-3,8,10-11"; "" for an empty set), with two allocations (the sorted
// members and the result) for a list of up to 64 bytes, where String makes
// one more per range and for its buffer; a longer list grows the buffer on
// the heap, with the same text. A creation formats its CPUs and NUMA nodes under the lock,
// on the path of its reply (issue 45).
func Format(set cpuset.CPUSet) string {
	if set.IsEmpty() {
		return ""
	}
	ids := set.List()
	var short [64]byte
	b := short[:0]
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(ids[i]), 10)
		if j > i {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(ids[j]), 10)
		}
		i = j + 1
	}
	return string(b)
}
