package cli

// What validate says of the NUMA nodes' memory (docs/placement.md, "Memory
// follows the CPUs"): each node's memory and hugepages, the reserves, and
// the nodes of the exclusive pools whose containers cannot have the
// hugepages other such nodes have.

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// printNodeMemory writes each NUMA node's memory and hugepages, as the
// kernel counts them now, and what every node keeps for the host.
func printNodeMemory(w io.Writer, cfg *config.Config, topo *sysfs.Topology) {
	for _, n := range topo.NUMANodes {
		var s string
		switch {
		case !n.HasMemory:
			s = "no memory (CPUs only)"
		case n.MemTotalKB > 0:
			// As status prints memory (memoryAmount): "62.7Gi", not
			// the kernel's "65842732Ki".
			s = "memory " + memoryAmount(n.MemTotalKB*1024)
		default:
			s = "memory unknown"
		}
		if n.HasMemory {
			if len(n.HugePages) == 0 {
				s += ", no hugepages"
			}
			for _, hp := range n.HugePages {
				s += fmt.Sprintf(", hugepages-%s %d", sysfs.HugePageSizeName(hp.SizeKB), hp.Total)
			}
		}
		fmt.Fprintf(w, "  %-23s %s\n", fmt.Sprintf("NUMA node %d:", n.ID), s)
	}
	var kept []string
	if b := cfg.Memory.ReservedBytes(); b > 0 {
		kept = append(kept, "memory "+memoryAmount(b))
	}
	pages := cfg.Memory.ReservedPages()
	for _, size := range slices.Sorted(maps.Keys(pages)) {
		kept = append(kept, fmt.Sprintf("hugepages-%s %d", sysfs.HugePageSizeName(size), pages[size]))
	}
	if len(kept) == 0 {
		kept = []string{"nothing"}
	}
	fmt.Fprintf(w, "  kept for the host on each NUMA node: %s (memory.reservedPerNode, memory.reservedHugePagesPerNode)\n", strings.Join(kept, ", "))
}

// hugePageProblems warns of each NUMA node of the exclusive pools that
// has no pages of a size other such nodes have: an exclusive container
// that asks for pages of that size gets its CPUs and memory on those
// other nodes only (issue 31's VM: every such container on node 1), and
// is refused when their pages are taken. Nothing is said when no node of
// the exclusive pools has pages of a size (nobody can ask for them), nor
// when the plugin does not pin memory (it does not count pages then).
func hugePageProblems(cfg *config.Config, topo *sysfs.Topology, layout *allocator.Layout) config.Problems {
	var problems config.Problems
	if !cfg.PinMemory {
		return problems
	}
	exclusive := layout.Exclusive.Union(layout.ExclusiveNonIsolcpus)
	var nodes []sysfs.NUMANode
	for _, n := range topo.NUMANodes {
		if n.HasMemory && !n.CPUs.Intersection(exclusive).IsEmpty() {
			nodes = append(nodes, n)
		}
	}
	pagesOf := func(n sysfs.NUMANode, size int64) int64 {
		for _, hp := range n.HugePages {
			if hp.SizeKB == size {
				return hp.Total
			}
		}
		return 0
	}
	sizes := map[int64]bool{}
	for _, n := range nodes {
		for _, hp := range n.HugePages {
			if hp.Total > 0 {
				sizes[hp.SizeKB] = true
			}
		}
	}
	for _, n := range nodes {
		var what []string
		for _, size := range slices.Sorted(maps.Keys(sizes)) {
			if pagesOf(n, size) > 0 {
				continue
			}
			var have []string
			for _, o := range nodes {
				if p := pagesOf(o, size); p > 0 {
					have = append(have, fmt.Sprintf("node %d (%d pages)", o.ID, p))
				}
			}
			what = append(what, fmt.Sprintf("containers that ask for hugepages-%s get CPUs and memory of %s only, and are refused when those pages are taken; to give node %d pages of %s, write their number to /sys/devices/system/node/node%d/hugepages/hugepages-%dkB/nr_hugepages at boot, or spread them on the kernel command line (hugepagesz=%s hugepages=%s)",
				sysfs.HugePageSizeName(size), strings.Join(have, ", "), n.ID, sysfs.HugePageSizeName(size), n.ID, size,
				kernelSize(size), perNodeExample(nodes)))
		}
		if len(what) > 0 {
			problems.Warnf("memory", "NUMA node %d has exclusive CPUs %s but no hugepages of a size other nodes of the exclusive pools have: %s",
				n.ID, n.CPUs.Intersection(exclusive), strings.Join(what, "; "))
		}
	}
	return problems
}

// kernelSize names a page size as hugepagesz= does: 2M, 1G.
func kernelSize(sizeKB int64) string {
	return strings.TrimSuffix(sysfs.HugePageSizeName(sizeKB), "i")
}

// perNodeExample is the per-node form of hugepages=, with N for each node.
func perNodeExample(nodes []sysfs.NUMANode) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = strconv.Itoa(n.ID) + ":N"
	}
	return strings.Join(parts, ",")
}
