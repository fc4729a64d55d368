package numamem

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"
)

// Demand is what a container asks of its NUMA nodes' memory: its memory
// limit and its hugepage limits, from its OCI spec. A container without a
// memory limit asks for no memory: the kernel bounds it by nothing we could
// count.
type Demand struct {
	// Memory is the memory limit in bytes; 0 asks for none.
	Memory int64
	// HugePages are the hugepages asked for, by size, ascending; every
	// count is positive.
	HugePages []Pages
}

// Pages is a number of hugepages of one size.
type Pages struct {
	SizeKB int64
	Count  int64
}

// IsZero tells that the demand asks for nothing.
func (d Demand) IsZero() bool { return d.Memory <= 0 && len(d.HugePages) == 0 }

// NodeMemory is what a holder holds of one NUMA node's memory.
type NodeMemory struct {
	Node      int
	Memory    int64
	HugePages []Pages
}

// DemandOf is the demand that holdings add up to.
func DemandOf(held []NodeMemory) Demand {
	var d Demand
	for _, nm := range held {
		d.Memory += nm.Memory
		for _, p := range nm.HugePages {
			d.HugePages = addPages(d.HugePages, p.SizeKB, p.Count)
		}
	}
	return d
}

// Equal tells that two demands ask for the same.
func (d Demand) Equal(o Demand) bool {
	return max(d.Memory, 0) == max(o.Memory, 0) && slices.Equal(d.HugePages, o.HugePages)
}

// NodeSet is the nodes holdings hold memory of.
func NodeSet(held []NodeMemory) cpuset.CPUSet {
	ids := make([]int, len(held))
	for i, nm := range held {
		ids[i] = nm.Node
	}
	return cpuset.New(ids...)
}

// OnNode is a whole demand held on one node: what Split returns when that
// node, the first of its order, holds all of it.
func OnNode(d Demand, node int) []NodeMemory {
	return []NodeMemory{{Node: node, Memory: max(d.Memory, 0), HugePages: slices.Clone(d.HugePages)}}
}

// addPages adds n pages of a size to a list sorted by size.
func addPages(ps []Pages, sizeKB, n int64) []Pages {
	if n == 0 {
		return ps
	}
	i, found := slices.BinarySearchFunc(ps, sizeKB, func(p Pages, s int64) int { return cmpInt64(p.SizeKB, s) })
	if found {
		out := slices.Clone(ps)
		out[i].Count += n
		return out
	}
	return slices.Insert(slices.Clone(ps), i, Pages{SizeKB: sizeKB, Count: n})
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Bytes writes an amount of memory the Kubernetes way: "8Gi", "1536Mi",
// exact, in the largest binary unit that divides it.
func Bytes(b int64) string {
	return resource.NewQuantity(b, resource.BinarySI).String()
}
