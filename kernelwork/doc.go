// Package kernelwork keeps kernel work that follows a CPU mask in sysfs off
// the CPUs exclusive containers hold, as hostfiles Sources, so that every
// mask it narrows is journaled first and put back exactly, also after a
// kill -9 at any point:
//
//   - receive packet steering (RPSSource, owner "rps"): each network
//     device's /sys/class/net/<dev>/queues/rx-<n>/rps_cpus, the CPUs whose
//     softirq processes the packets that queue receives, and
//     /proc/sys/net/core/rps_default_mask, what new devices start with;
//   - unbound workqueues (WorkqueueSource, owner "workqueues"): the global
//     /sys/devices/virtual/workqueue/cpumask and each WQ_SYSFS workqueue's
//     own /sys/devices/virtual/workqueue/<wq>/cpumask.
//
// A mask gets its original less the held CPUs (mask.go). A mask that
// would be left with no online CPU outside isolcpus= (empty, or offline
// or isolated CPUs only) gets the CPUs the host keeps (online, not held,
// not isolcpus=): the kernel refuses an empty mask, turns RPS off on one
// of offline CPUs and refuses one of isolated CPUs, and runs a
// workqueue's workers anywhere when its mask has no online CPU; none is
// what the mask's owner asked for. A mask of 0 (RPS off, the kernel's
// default) has nothing to move and is left alone.
//
// Files that appear later (a hotplugged NIC, the veth of every new pod)
// are found by the next pass: a kick (a container placed or released) or
// the rescan (irq.rescanInterval), as new IRQs are. A pod's veth is born
// with net.core.rps_default_mask, 0 unless an operator set it (RPS off,
// nothing to move); one that is set is narrowed with the queues' masks
// (RPSDefaultMask), so that a device born between two passes does not
// start out steering to a held CPU.
package kernelwork
