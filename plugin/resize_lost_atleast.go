package plugin

// A restart and a quota-lifted container ("at least 256 CPUs"): a set that
// is no grow of its record.

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
)

// atLeastNoGrow tells whether keepResized must leave a remembered
// container to repairAll without reading its set as a lost resize: the
// runtime shows its request only as "at least" milli (the plugin lifted
// its quota; the shares are at their cap), which its record meets, and it
// runs on a set that is no grow of its record (part is its exclusive part
// there). Such a set says nothing of a request: judged as a resize to the
// bound it was logged as one, with the advice for a kubelet without a CFS
// quota, for a container no resize touched.
func atLeastNoGrow(rec allocator.Assignment, part cpuset.CPUSet, milli int64, atLeast bool) bool {
	return atLeast && rec.MilliCPU >= milli && (part.Size() <= rec.CPUs.Size() || !rec.CPUs.IsSubsetOf(part))
}
