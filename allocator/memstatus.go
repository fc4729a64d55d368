package allocator

import (
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// NUMAMemoryStatus is the memory report in the form the state file keeps
// for `nri-cpupool status` and `simulate --json` prints: the same figures
// as the metrics, one conversion for both.
func NUMAMemoryStatus(reports []NodeMemoryReport) []state.NUMAMemory {
	if len(reports) == 0 {
		return nil
	}
	out := make([]state.NUMAMemory, 0, len(reports))
	for _, r := range reports {
		nm := state.NUMAMemory{Node: r.Node, Memory: state.NUMAMemoryBytes{Reserved: r.Reserved, Held: r.Held}}
		if r.Capacity >= 0 {
			capacity, free := r.Capacity, r.Free
			nm.Memory.Capacity, nm.Memory.Free = &capacity, &free
		}
		for _, p := range r.HugePages {
			nm.HugePages = append(nm.HugePages, state.NUMAHugePages{Size: sysfs.HugePageSizeName(p.SizeKB),
				Total: p.Total, Reserved: p.Reserved, Held: p.Held, Free: p.Free})
		}
		out = append(out, nm)
	}
	return out
}
