// Package dra makes the daemon a Dynamic Resource Allocation driver named
// cpupool.dev: it publishes the exclusive pools in ResourceSlices, so that
// the scheduler allocates exclusive CPUs by NUMA node (and aligns them with
// other drivers' devices through resource.kubernetes.io/numaNode), and it
// prepares allocated claims for the kubelet: it chooses the CPUs, records
// them, and writes a CDI spec whose environment variable lets the NRI
// plugin recognise the claim's container.
//
// The model (see docs/dra.md): one device per CPU of a pool on a NUMA node,
// and the devices of one pool and node are interchangeable slots. The
// scheduler decides how many CPUs of which pool a claim gets on which NUMA
// node; which CPUs of that node is decided at Prepare by the allocator's
// placement rules (whole cores, fewest L3 groups, best fit), over what no
// container and no other claim holds.
//
// What the CPUs are and who holds them is the Pools' business (the plugin,
// or Static for a node without containers); this package speaks the
// kubelet's DRA API, the ResourceSlice API and CDI. What needs no
// Kubernetes library is in package dracore (see core.go), which the
// binary without the driver links; this package is in nri-cpupool-dra.
package dra
