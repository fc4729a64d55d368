package plugin

// A container's demand of memory, from its OCI spec as NRI shows it: the
// hugepage limits the kubelet writes for its hugepages-<size> requests, and
// its memory limit. Parsed and bounded before the plugin's lock, as any
// input a tenant shapes.

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/containerd/nri/pkg/api"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/sysfs"
)

const (
	// maxHugePageLimits bounds the hugepage limits read: a kernel has a
	// handful of sizes.
	maxHugePageLimits = 8
	// maxMemoryBytes caps a limit before any arithmetic: 1 PiB is beyond
	// any node, and nothing overflows below it.
	maxMemoryBytes = int64(1) << 50
	// maxPageSizeKB is the largest page size read, 16 GiB (POWER's
	// largest; x86 has 1 GiB): a larger one is no page size, and its
	// size in bytes could wrap (to 0: a division by zero).
	maxPageSizeKB = int64(16) << 20
)

// demandOf reads the container's hugepage limits and memory limit. A
// malformed or repeated page size is an error; a limit of 0 asks nothing.
func demandOf(ctr *api.Container) (numamem.Demand, error) {
	res := ctr.GetLinux().GetResources()
	var d numamem.Demand
	if limit := res.GetMemory().GetLimit().GetValue(); limit > 0 {
		d.Memory = min(limit, maxMemoryBytes)
	}
	limits := res.GetHugepageLimits()
	if len(limits) > maxHugePageLimits {
		return numamem.Demand{}, fmt.Errorf("%d hugepage limits; a node has at most %d page sizes", len(limits), maxHugePageLimits)
	}
	for _, l := range limits {
		if l.GetLimit() == 0 {
			continue
		}
		sizeKB, err := ociPageSizeKB(l.GetPageSize())
		if err != nil {
			return numamem.Demand{}, err
		}
		for _, p := range d.HugePages {
			if p.SizeKB == sizeKB {
				return numamem.Demand{}, fmt.Errorf("hugepage size %s is limited twice", cpulist.Echo(l.GetPageSize()))
			}
		}
		size := sizeKB * 1024
		limit := int64(min(l.GetLimit(), uint64(maxMemoryBytes)))
		d.HugePages = append(d.HugePages, numamem.Pages{SizeKB: sizeKB, Count: (limit + size - 1) / size})
	}
	sortPages(d.HugePages)
	return d, nil
}

// memoryLimitOf is the memory limit an UpdateContainer asks for, read and
// bounded as demandOf reads a creation's (a limit of 0 or less asks for no
// memory); ok is false when the update names none: it leaves the memory
// limit as it is.
func memoryLimitOf(res *api.LinuxResources) (limit int64, ok bool) {
	l := res.GetMemory().GetLimit()
	if l == nil {
		return 0, false
	}
	return min(max(l.GetValue(), 0), maxMemoryBytes), true
}

// ociPageSizeKB reads a page size as the OCI spec writes it ("2MB", "1GB",
// "64KB": binary units, as runc reads them) in KiB, at most 16 GiB.
func ociPageSizeKB(s string) (int64, error) {
	if len(s) <= 12 && len(s) > 2 {
		var sh uint
		switch s[len(s)-2:] {
		case "KB":
			sh = 0
		case "MB":
			sh = 10
		case "GB":
			sh = 20
		case "TB":
			sh = 30
		default:
			return 0, badPageSize(s)
		}
		v, err := strconv.ParseInt(s[:len(s)-2], 10, 32)
		if err == nil && v > 0 && v&(v-1) == 0 && v <= maxPageSizeKB>>sh {
			return v << sh, nil
		}
	}
	return 0, badPageSize(s)
}

// badPageSize is built only on failure: the reply path reads every
// container's page sizes.
func badPageSize(s string) error {
	return fmt.Errorf("hugepage size %s is not a size such as 2MB or 1GB", cpulist.Echo(s))
}

func sortPages(ps []numamem.Pages) {
	slices.SortFunc(ps, func(a, b numamem.Pages) int { return cmp.Compare(a.SizeKB, b.SizeKB) })
}

// hugePagesNow reads every node's hugepage counts for a decision about a
// container that asks for hugepages (nil for any other): pages are
// reserved and taken at run time, by processes the plugin does not know.
// A read that fails leaves the counts last read, with a warning. A
// creation hands the allocator readHugePages instead, which reads only the
// nodes its decision needs (allocator/hugelive.go). topo is the plugin's
// topology, read by the caller under the lock: a CPU hotplug replaces it.
func (p *Plugin) hugePagesNow(topo *sysfs.Topology, d numamem.Demand) map[int][]sysfs.HugePages {
	if len(d.HugePages) == 0 {
		return nil
	}
	nodes := make([]int, 0, len(topo.NUMANodes))
	for _, n := range topo.NUMANodes {
		if n.HasMemory {
			nodes = append(nodes, n.ID)
		}
	}
	sizes := make([]int64, len(d.HugePages))
	for i, hp := range d.HugePages {
		sizes[i] = hp.SizeKB
	}
	return p.readHugePages(nodes, sizes)
}

// readHugePages is the allocator's HugePageReader: the counts of the sizes
// given on the nodes given, read now through the files kept open (a few
// tenths of a microsecond a file on sysfs); nil, with a warning, when a
// read fails, and the decision is made on the counts last read.
func (p *Plugin) readHugePages(nodes []int, sizesKB []int64) map[int][]sysfs.HugePages {
	now, err := p.hugePages.Read(nodes, sizesKB, p.hugePageReads.Add(1))
	if err != nil {
		p.log.Warnf("reading hugepage counts: %v; deciding on those last read", err)
		return nil
	}
	return now
}

// runtimeDemand is a running container's demand at Synchronize, where the
// runtime is the truth: a malformed one asks nothing, with a warning (the
// container runs already; refusing it is not ours to do).
func (p *Plugin) runtimeDemand(c *api.Container, who string) numamem.Demand {
	d, err := demandOf(c)
	if err != nil {
		p.log.Warnf("synchronize: container %s: %v; its memory is not counted", who, err)
	}
	return d
}
