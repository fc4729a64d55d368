package numamem

import (
	"fmt"
	"strings"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// Shortage describes, per hugepage size the nodes cannot hold (and the
// memory, when it cannot), what was asked and what each node has:
// "hugepages-2Mi: asked 16, free node0 0 node1 0". hugePages tells that
// hugepages are short, which refuses the container.
func (f *Fit) Shortage(memNodes []int) (msg string, hugePages bool) {
	var parts []string
	for i, want := range f.demand.HugePages {
		sum := int64(0)
		free := make([]string, 0, len(memNodes))
		for _, n := range memNodes {
			sum += f.pagesAt(i, n)
			free = append(free, fmt.Sprintf("node%d %d", n, f.pagesAt(i, n)))
		}
		if sum < want.Count {
			hugePages = true
			parts = append(parts, fmt.Sprintf("hugepages-%s: asked %d, free %s", sysfs.HugePageSizeName(want.SizeKB), want.Count, strings.Join(free, " ")))
		}
	}
	if f.demand.Memory > 0 && !f.FitsMemory(memNodes) {
		free := make([]string, 0, len(memNodes))
		for _, n := range memNodes {
			free = append(free, fmt.Sprintf("node%d %s", n, Bytes(max(0, f.memoryAt(n)))))
		}
		parts = append(parts, fmt.Sprintf("memory: asked %s, free %s", Bytes(f.demand.Memory), strings.Join(free, " ")))
	}
	return strings.Join(parts, "; "), hugePages
}

// Refusal is the refusal of a demand whose hugepages the memory nodes
// given (every node a placement may use) cannot hold, or false when only
// the memory limit is short: then the memory limit is set aside (the
// placement is made with Warning) and the caller tries again. pool and who
// name the pool and the container for the message.
func (f *Fit) Refusal(pool, who string, memNodes []int) (error, bool) {
	if f.Fits(memNodes) {
		return nil, false // memory is not what is short
	}
	msg, hugePages := f.Shortage(memNodes)
	if hugePages {
		return fmt.Errorf("pool %s cannot fit %s: %s; reserve hugepages on a NUMA node of the pool (nodeN/hugepages/hugepages-<size>kB/nr_hugepages, or hugepagesz= and hugepages= on the kernel command line), wait for the pods that hold them to end, or lower the container's hugepages limit", pool, who, msg), true
	}
	f.ignoreMemory = true
	f.warning = fmt.Sprintf("%s: %s; no set of NUMA nodes holds its memory limit, so it is placed by the CPU rules and may be OOM-killed before the limit: lower memory.reservedPerNode or the limit", who, msg)
	return nil, false
}
