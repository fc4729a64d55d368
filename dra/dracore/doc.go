// Package dracore is the part of the cpupool.dev DRA driver that needs no
// Kubernetes library: the driver's names (devices, attributes,
// capacities), the slots a node offers, the pools interface the daemon
// implements, the claim tokens a container shows and the grant it gets,
// and the driver's status file. The NRI plugin and the `status` and
// `validate` commands use only this package, so that nri-cpupool, the
// binary without the driver, links no Kubernetes client (issue 33: its
// memory); the driver itself, package dra, is in nri-cpupool-dra.
package dracore

// DriverName is the DRA driver's name, in ResourceSlices, DeviceClasses and
// allocation results; also the domain of the driver's attributes.
const DriverName = "cpupool.dev"
