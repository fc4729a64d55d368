// Package sysfs discovers a node's CPU topology read-only from a sysfs tree
// (and /proc/cmdline) below a configurable root, so that tests and the
// simulator can run against fixtures of machines we do not have.
package sysfs

import (
	"sort"

	"k8s.io/utils/cpuset"
)

// Unknown marks a topology attribute the kernel did not report (an offline
// CPU has no topology directory, an old kernel has no cache ids).
const Unknown = -1

// Topology is everything the allocator needs to know about the node. It is a
// plain value: tests may build one by hand.
type Topology struct {
	// CPUs holds every present CPU, online or not, sorted by ID.
	CPUs []CPU
	// Online, Offline and Present are the kernel's CPU masks.
	Online  cpuset.CPUSet
	Offline cpuset.CPUSet
	Present cpuset.CPUSet
	// Possible is the kernel's possible mask (cpu/possible): the slots a
	// vCPU may be hot-added to or hot-removed from. Empty when the kernel
	// does not say (PossibleCPUs then stands for it).
	Possible cpuset.CPUSet
	// Absent are the CPUs the hypervisor hot-removed that are put back
	// at the place they had while present (WithRemembered): they are in
	// Present and Offline too, so that the pools are carved with them as
	// with any offline CPU. Empty as Discover reads the node.
	Absent cpuset.CPUSet
	// Isolated is the kernel's isolated set; IsolatedSource tells where it
	// came from ("sysfs", "cmdline isolcpus=", "cmdline nohz_full=" or "").
	Isolated       cpuset.CPUSet
	IsolatedSource string
	// DomainIsolated are the CPUs taken out of the scheduler's load
	// balancing: the kernel's isolated mask, and isolcpus= given without
	// flags or with the domain flag. Threads there stay where they start.
	DomainIsolated cpuset.CPUSet
	// NUMANodes holds the NUMA nodes sorted by ID.
	NUMANodes []NUMANode
	// SMTActive mirrors /sys/devices/system/cpu/smt/active when present.
	SMTActive bool
	// SMTControl is /sys/devices/system/cpu/smt/control ("on", "off",
	// "forceoff", "notsupported", "notimplemented"; "" when absent).
	SMTControl string
}

// SMTDisabled tells whether the kernel keeps every core's second threads
// offline and refuses to bring them online (nosmt, or smt/control set to
// off): such offline CPUs are present but can never be used.
func (t *Topology) SMTDisabled() bool {
	return t.SMTControl == "off" || t.SMTControl == "forceoff"
}

// CPU describes one logical CPU.
type CPU struct {
	ID     int  `json:"id"`
	Online bool `json:"online"`
	// Socket is physical_package_id, Die is die_id, Cluster is cluster_id.
	Socket  int `json:"socket"`
	Die     int `json:"die"`
	Cluster int `json:"cluster"`
	// CoreID is the kernel's core_id: unique only inside a package, and not
	// contiguous on many Intel parts.
	CoreID int `json:"coreId"`
	// Core is unique per physical core across the node: a dense index in
	// order of each core's lowest CPU ID.
	Core int `json:"core"`
	// Siblings are the hardware threads of this CPU's core (itself included).
	Siblings cpuset.CPUSet `json:"-"`
	// L2 and L3 are dense cache group indexes (order of each group's lowest
	// CPU ID), Unknown when the cache is not reported.
	L2 int `json:"l2"`
	L3 int `json:"l3"`
	// L2Cache and L3Cache are those caches as the kernel reports them.
	L2Cache Cache `json:"-"`
	L3Cache Cache `json:"-"`
	// NUMA is the CPU's NUMA node, Unknown when no node lists it.
	NUMA int `json:"numa"`
	// BaseFreqKHz is cpufreq/base_frequency (Intel SST-BF exposes higher
	// values on its high-priority cores); MaxFreqKHz is cpuinfo_max_freq.
	BaseFreqKHz int64 `json:"baseFrequencyKHz,omitempty"`
	MaxFreqKHz  int64 `json:"maxFrequencyKHz,omitempty"`
}

// Cache is one of a CPU's unified caches.
type Cache struct {
	// ID is the kernel's cache id (cache/indexN/id), Unknown on kernels
	// that do not report it.
	ID int
	// SharedCPUs is shared_cpu_list: the CPUs using this cache.
	SharedCPUs cpuset.CPUSet
}

// NUMANode describes one NUMA node.
type NUMANode struct {
	ID   int           `json:"id"`
	CPUs cpuset.CPUSet `json:"-"`
	// Distance is the node's row of the SLIT table, indexed by position in
	// Topology.NUMANodes order as the kernel prints it.
	Distance  []int `json:"distance"`
	HasMemory bool  `json:"hasMemory"`
	// MemTotalKB is MemTotal from the node's meminfo, 0 when unknown. It
	// includes the memory of the node's hugepages.
	MemTotalKB int64 `json:"memTotalKB"`
	// HugePages are the node's hugepage pools by size, ascending, as
	// discovered; decisions read the counts again (ReadHugePages).
	HugePages []HugePages `json:"hugePages,omitempty"`
}

// CPU returns the CPU with the given ID.
func (t *Topology) CPU(id int) (CPU, bool) {
	for _, c := range t.CPUs {
		if c.ID == id {
			return c, true
		}
	}
	return CPU{}, false
}

// NUMANode returns the node with the given ID.
func (t *Topology) NUMANode(id int) (NUMANode, bool) {
	for _, n := range t.NUMANodes {
		if n.ID == id {
			return n, true
		}
	}
	return NUMANode{}, false
}

// Sockets returns the distinct sockets of online CPUs, ascending.
func (t *Topology) Sockets() []int { return t.distinct(func(c CPU) int { return c.Socket }) }

// L3Groups returns the distinct L3 group indexes of online CPUs, ascending.
func (t *Topology) L3Groups() []int { return t.distinct(func(c CPU) int { return c.L3 }) }

// Cores returns the number of distinct physical cores with an online CPU.
func (t *Topology) Cores() int { return len(t.distinct(func(c CPU) int { return c.Core })) }

func (t *Topology) distinct(key func(CPU) int) []int {
	seen := map[int]bool{}
	var out []int
	for _, c := range t.CPUs {
		if !c.Online {
			continue
		}
		k := key(c)
		if k == Unknown || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// PossibleCPUs is the possible mask, never less than the present CPUs
// (a node without cpu/possible, a topology built by hand).
func (t *Topology) PossibleCPUs() cpuset.CPUSet { return t.Possible.Union(t.Present) }

// CPUsWhere returns the online CPUs for which keep is true.
func (t *Topology) CPUsWhere(keep func(CPU) bool) cpuset.CPUSet {
	return t.AllCPUsWhere(func(c CPU) bool { return c.Online && keep(c) })
}

// AllCPUsWhere returns the CPUs, online or not, for which keep is true:
// what a placement may choose should a CPU come online while it runs.
func (t *Topology) AllCPUsWhere(keep func(CPU) bool) cpuset.CPUSet {
	var ids []int
	for _, c := range t.CPUs {
		if keep(c) {
			ids = append(ids, c.ID)
		}
	}
	return cpuset.New(ids...)
}

// NUMANodesOf returns the NUMA nodes of the given CPUs.
func (t *Topology) NUMANodesOf(cpus cpuset.CPUSet) cpuset.CPUSet {
	var nodes []int
	for _, c := range t.CPUs {
		if cpus.Contains(c.ID) && c.NUMA != Unknown {
			nodes = append(nodes, c.NUMA)
		}
	}
	return cpuset.New(nodes...)
}
