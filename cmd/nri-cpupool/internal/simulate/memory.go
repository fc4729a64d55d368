package simulate

// A simulated container's memory demand (docs/placement.md, "Memory
// follows the CPUs"): its memory limit and its hugepage limits, written as
// a pod spec writes them (memory: 1Gi, hugepages-2Mi: 64Mi), which the
// kubelet turns into the OCI spec's limits that the plugin reads. Each is
// parsed as a Kubernetes quantity and bounded before any arithmetic.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/sysfs"
)

const (
	// hugePagesPrefix starts the keys of the hugepage limits, as in the
	// Kubernetes resource names hugepages-2Mi and hugepages-1Gi.
	hugePagesPrefix = "hugepages-"
	// maxHugePageSizes bounds the sizes one container asks for: a kernel
	// has a handful (the plugin reads at most as many from a spec).
	maxHugePageSizes = 8
	// maxMemoryBytes bounds a limit: 1 PiB is beyond any node, and no
	// count of pages or bytes overflows below it.
	maxMemoryBytes = int64(1) << 50
	// maxPageSizeKB is the largest page size, 16 GiB (POWER's largest).
	maxPageSizeKB = int64(16) << 20
)

// checkLimitKeys rejects the keys of a create that are neither its fields
// nor hugepages-<size> (the inline map catches every other key).
func checkLimitKeys(c *Create) error {
	for _, k := range slices.Sorted(maps.Keys(c.HugePages)) {
		if !strings.HasPrefix(k, hugePagesPrefix) {
			return fmt.Errorf("unknown key %s (a create takes pod, namespace, container, cpus, limit, memory, hugepages-<size> such as hugepages-2Mi, qos, annotations and devices)", cpulist.EchoLong(k))
		}
	}
	return nil
}

// demandOf is the container's memory demand, or an error that names the
// key and what to write instead.
func demandOf(c *Create) (numamem.Demand, error) {
	var d numamem.Demand
	if s := strings.TrimSpace(c.Memory); s != "" {
		b, err := bytesOf("memory", s)
		if err != nil {
			return d, err
		}
		d.Memory = b
	}
	if len(c.HugePages) > maxHugePageSizes {
		return d, fmt.Errorf("%d hugepage sizes; a node has at most %d", len(c.HugePages), maxHugePageSizes)
	}
	for _, key := range slices.Sorted(maps.Keys(c.HugePages)) {
		name := strings.TrimPrefix(key, hugePagesPrefix)
		sizeKB, err := config.HugePageSizeKB(name)
		if err == nil && sizeKB > maxPageSizeKB {
			err = fmt.Errorf("%s is larger than any page size (at most 16Gi)", cpulist.EchoLong(name))
		}
		if err != nil {
			return d, fmt.Errorf("%s: %w", config.KeyEcho(key), err)
		}
		if slices.ContainsFunc(d.HugePages, func(p numamem.Pages) bool { return p.SizeKB == sizeKB }) {
			return d, fmt.Errorf("%s: the page size %s is asked for twice; give each size once", config.KeyEcho(key), sysfs.HugePageSizeName(sizeKB))
		}
		b, err := bytesOf(key, c.HugePages[key])
		if err != nil {
			return d, err
		}
		if size := sizeKB * 1024; b%size != 0 {
			n := b / size
			return d, fmt.Errorf("%s %s is not a whole number of %s pages; write a multiple of %s, such as %q or %q",
				config.KeyEcho(key), cpulist.EchoLong(c.HugePages[key]), sysfs.HugePageSizeName(sizeKB), sysfs.HugePageSizeName(sizeKB),
				numamem.Bytes(n*size), numamem.Bytes((n+1)*size))
		}
		if n := b / (sizeKB * 1024); n > 0 {
			d.HugePages = append(d.HugePages, numamem.Pages{SizeKB: sizeKB, Count: n})
		}
	}
	slices.SortFunc(d.HugePages, func(a, b numamem.Pages) int { return int(a.SizeKB - b.SizeKB) })
	return d, nil
}

// bytesOf parses a quantity of memory in bytes, at most maxMemoryBytes.
func bytesOf(key, s string) (int64, error) {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s %s is not a quantity of memory (write e.g. \"64Mi\" or \"2Gi\")", config.KeyEcho(key), cpulist.EchoLong(s))
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("%s %s is negative; write a quantity of 0 or more, such as \"64Mi\"", config.KeyEcho(key), cpulist.EchoLong(s))
	}
	// Value wraps around beyond int64: bound the quantity first.
	if q.Cmp(*resource.NewQuantity(maxMemoryBytes, resource.BinarySI)) > 0 {
		return 0, fmt.Errorf("%s %s is larger than any node (at most 1Pi)", config.KeyEcho(key), cpulist.EchoLong(s))
	}
	return q.Value(), nil
}

// HeldMemory is what a container holds of one NUMA node after a step: its
// memory in bytes and its hugepages by size ("2Mi": 16).
type HeldMemory struct {
	Node      int              `json:"node"`
	Memory    int64            `json:"memory,omitempty"`
	HugePages map[string]int64 `json:"hugePages,omitempty"`
}

func heldMemory(held []numamem.NodeMemory) []HeldMemory {
	var out []HeldMemory
	for _, nm := range held {
		h := HeldMemory{Node: nm.Node, Memory: nm.Memory}
		for _, p := range nm.HugePages {
			if h.HugePages == nil {
				h.HugePages = map[string]int64{}
			}
			h.HugePages[sysfs.HugePageSizeName(p.SizeKB)] = p.Count
		}
		out = append(out, h)
	}
	return out
}

// asksMemory tells whether any step of the file asks for memory or
// hugepages: only then do the results carry the nodes' memory, which no
// other step changes.
func asksMemory(f *File) bool {
	for _, s := range f.Steps {
		if c := s.Create; c != nil && (strings.TrimSpace(c.Memory) != "" || len(c.HugePages) > 0) {
			return true
		}
		if rs := s.Resize; rs != nil && strings.TrimSpace(rs.Memory) != "" {
			return true
		}
	}
	return false
}
