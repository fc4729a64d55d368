package state

// NUMAMemory is one NUMA node's memory and hugepages when the file was
// written, as the plugin counts them (the allocator's MemoryReport, which
// the metrics cpupool_numa_memory_bytes and cpupool_numa_hugepages show
// too), for `nri-cpupool status`: nothing reads it back. Memory is in
// bytes, hugepages in pages.
type NUMAMemory struct {
	Node      int             `json:"node"`
	Memory    NUMAMemoryBytes `json:"memory"`
	HugePages []NUMAHugePages `json:"hugePages,omitempty"`
}

// NUMAMemoryBytes is a node's memory: Capacity is MemTotal less the
// node's hugepage pools; Reserved the host's reserve
// (memory.reservedPerNode); Held the memory limits of the containers and
// holds whose memory the plugin pins there; Free what such a container may
// still have. Capacity and Free are absent when MemTotal is unknown.
type NUMAMemoryBytes struct {
	Capacity *int64 `json:"capacity,omitempty"`
	Reserved int64  `json:"reserved"`
	Held     int64  `json:"held"`
	Free     *int64 `json:"free,omitempty"`
}

// NUMAHugePages is a node's hugepages of one size, named the Kubernetes
// way ("2Mi", "1Gi"): Total is nr_hugepages, Reserved the host's reserve
// (memory.reservedHugePagesPerNode), Held the pages of the containers and
// holds whose memory the plugin pins there, Free what such a container may
// still have (no more than free_hugepages as last read).
type NUMAHugePages struct {
	Size     string `json:"size"`
	Total    int64  `json:"total"`
	Reserved int64  `json:"reserved"`
	Held     int64  `json:"held"`
	Free     int64  `json:"free"`
}
