package kernelwork

import (
	"k8s.io/utils/cpuset"
)

// Config is where a Source looks and what it asks at each pass.
type Config struct {
	// SysfsRoot is the root of sysfs ("/": sys/class/net below it).
	SysfsRoot string
	// ProcRoot is the root of procfs ("/proc": sys/net/core below it),
	// for net.core.rps_default_mask; "" leaves that mask alone.
	ProcRoot string
	// Online are the online CPUs, DomainIsolated those of isolcpus=: a
	// mask left with none of Online less DomainIsolated once the held
	// CPUs are out gets Online less the held and the isolated CPUs (the
	// kernel drops isolated CPUs from rps_cpus and the unbound workqueue
	// mask itself).
	Online, DomainIsolated cpuset.CPUSet
	// Held is asked at each pass (on the reconciler's goroutine): the CPUs
	// to keep the work off. Nothing held: every mask is restored.
	Held func() cpuset.CPUSet
}

// runnable are the CPUs a mask's work may run on: online and not
// isolcpus=. The kernel builds an RPS map of these only, and an unbound
// workqueue whose mask has none of them runs its workers wherever the
// scheduler falls back to.
func (c Config) runnable() cpuset.CPUSet {
	return c.Online.Difference(c.DomainIsolated)
}
