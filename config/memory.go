package config

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// Memory is what every NUMA node keeps for the host: the plugin counts the
// memory limits and hugepages of the containers whose memory it pins
// (exclusive containers with pinMemory) against the rest of each node
// (docs/placement.md, "Memory follows the CPUs").
type Memory struct {
	// ReservedPerNode is memory of each NUMA node kept for the host and
	// for containers whose memory is not pinned, as a Kubernetes quantity
	// ("2Gi"); empty keeps none.
	ReservedPerNode string `yaml:"reservedPerNode"`
	// ReservedHugePagesPerNode is, by page size named the Kubernetes way
	// ("2Mi", "1Gi"), how many pages of each NUMA node are kept for the
	// host (a DPDK process outside Kubernetes, a Burstable pod).
	ReservedHugePagesPerNode map[string]int64 `yaml:"reservedHugePagesPerNode"`
}

// ReservedBytes is ReservedPerNode in bytes; 0 when empty or invalid
// (Check reports an invalid one).
func (m Memory) ReservedBytes() int64 {
	if m.ReservedPerNode == "" {
		return 0
	}
	q, err := resource.ParseQuantity(m.ReservedPerNode)
	if err != nil || q.Sign() < 0 {
		return 0
	}
	return q.Value()
}

// ReservedPages is ReservedHugePagesPerNode by page size in KiB, the unit
// of sysfs's hugepages-<kB>kB directories; invalid sizes are left out
// (Check reports them).
func (m Memory) ReservedPages() map[int64]int64 {
	out := map[int64]int64{}
	for name, pages := range m.ReservedHugePagesPerNode {
		if kb, err := HugePageSizeKB(name); err == nil && pages > 0 {
			out[kb] = pages
		}
	}
	return out
}

// HugePageSizeKB reads a page size named the Kubernetes way ("2Mi", "1Gi")
// in KiB.
func HugePageSizeKB(name string) (int64, error) {
	q, err := resource.ParseQuantity(name)
	if err != nil {
		return 0, fmt.Errorf("%s is not a page size such as 2Mi or 1Gi", cpulist.EchoLong(name))
	}
	b := q.Value()
	if b < 4096 || b&(b-1) != 0 {
		return 0, fmt.Errorf("%s is not a page size (a power of two of at least 4Ki, such as 2Mi or 1Gi)", cpulist.EchoLong(name))
	}
	return b / 1024, nil
}

// checkMemory validates the memory keys.
func (c *Config) checkMemory(p *Problems) {
	if v := c.Memory.ReservedPerNode; v != "" {
		if q, err := resource.ParseQuantity(v); err != nil || q.Sign() < 0 {
			p.Errorf("memory.reservedPerNode", "%q is not a quantity of memory; write one such as \"2Gi\"", v)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Memory.ReservedHugePagesPerNode)) {
		if _, err := HugePageSizeKB(name); err != nil {
			p.Errorf("memory.reservedHugePagesPerNode", "%v", err)
		}
		if n := c.Memory.ReservedHugePagesPerNode[name]; n < 0 {
			p.Errorf("memory.reservedHugePagesPerNode."+name, "%d is negative; give a number of pages >= 0", n)
		}
	}
}
