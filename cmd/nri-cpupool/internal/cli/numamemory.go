package cli

// The NUMA nodes' memory as status, status --map and simulate print it:
// one row per node and resource (memory, then each hugepage size), so that
// a node of 8 NUMA nodes stays 8 to 24 short rows, however many sizes the
// kernel lists. The figures are the state file's (the allocator's memory
// report, which the metrics show too); this file only lays them out.

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/state"
)

// numaMemoryLegend follows the table's heading: what its columns count.
const numaMemoryLegend = "(held: by pinned containers and holds; free: for them; reserved: for the host)"

// printNUMAMemory writes the table under a heading and the legend;
// nothing for no nodes (a state file written before the plugin counted
// memory).
func printNUMAMemory(w io.Writer, heading string, nodes []state.NUMAMemory) {
	if len(nodes) == 0 {
		return
	}
	fmt.Fprintln(w, heading+" "+numaMemoryLegend)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NUMA NODE\tRESOURCE\tHELD\tFREE\tRESERVED\tTOTAL")
	for _, n := range nodes {
		m := n.Memory
		capacity, free := "unknown", "unknown"
		if m.Capacity != nil {
			capacity = memoryAmount(*m.Capacity)
		}
		if m.Free != nil {
			free = memoryAmount(*m.Free)
		}
		fmt.Fprintf(tw, "%d\tmemory\t%s\t%s\t%s\t%s\n", n.Node, memoryAmount(m.Held), free, memoryAmount(m.Reserved), capacity)
		for _, p := range n.HugePages {
			if p.Total == 0 && p.Reserved == 0 && p.Held == 0 {
				continue // a size the kernel lists on every node, unused here
			}
			fmt.Fprintf(tw, "%d\thugepages-%s\t%d\t%d\t%d\t%d\n", n.Node, p.Size, p.Held, p.Free, p.Reserved, p.Total)
		}
	}
	tw.Flush()
}

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// memoryAmount writes bytes for people, in Kubernetes units: exact when a
// whole number of GiB or (below 1 GiB) MiB, as limits and reserves are
// written; else to a tenth of a GiB, rounded down ("62.7Gi" for a
// MemTotal of 65842732 kB), since the kernel's counts are not round. The
// exact figures are in --json.
func memoryAmount(b int64) string {
	switch {
	case b == 0 || b%gib == 0 || (b < gib && b%mib == 0):
		return numamem.Bytes(b)
	case b >= gib:
		return fmt.Sprintf("%d.%dGi", b/gib, b%gib*10/gib)
	case b >= mib:
		return fmt.Sprintf("%dMi", b/mib)
	}
	return numamem.Bytes(b)
}
