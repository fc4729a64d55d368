package allocator

// Where an offline CPU goes when it comes online. A start, a reload and a
// CPU coming online carve the pools on the present CPUs (present.go) and
// then drop the offline ones; a CPU that comes online joins the pool the
// config carves it into (HotplugLayout). Whatever holds an offline CPU (a
// container, the hold of a stopped one, a kubelet allocation, a prepared
// DRA claim) keeps it while it is offline, so a config is judged on it as
// on an online CPU, by the pool it carves it into: one that carves it
// into another pool would, once the CPU is back, leave an exclusive
// container on a CPU the layout calls shared, or refuse the container the
// CPU was allocated for (review rvB).

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// carvedPool is a pool as carved, by Layout.Pool's rule: exclusive-non-isolcpus
// lends the carved infra CPUs that are neither reserved nor isolated.
func (l *Layout) carvedPool(pool string) cpuset.CPUSet {
	switch pool {
	case pools.Exclusive:
		return l.Carved.Exclusive
	case pools.ExclusiveNonIsolcpus:
		if l.LendsNonIsolcpus {
			return lendableCPUs(l.carvedInfra(), l.Carved.Reserved, l.Carved.Isolated)
		}
	}
	return cpuset.New()
}

// carvedKeepable is a pool as carved by keepable's rule: an
// exclusive-non-isolcpus container keeps isolated infra CPUs too.
func (l *Layout) carvedKeepable(pool string) cpuset.CPUSet {
	if pool != pools.ExclusiveNonIsolcpus || !l.LendsNonIsolcpus {
		return l.carvedPool(pool)
	}
	return l.carvedInfra().Difference(l.Carved.Reserved)
}

func (l *Layout) carvedInfra() cpuset.CPUSet {
	return l.Carved.Usable.Difference(l.Carved.Exclusive).Difference(l.Carved.Shared)
}

// OfflineOutside are the CPUs of cpus, given from pool, that are offline
// now and that the config carves into another pool: they would join it
// when they come online. It judges a kubelet allocation or a prepared
// claim (Layout.Pool's rule).
func (l *Layout) OfflineOutside(pool string, cpus cpuset.CPUSet) cpuset.CPUSet {
	return l.offlineOf(cpus).Difference(l.carvedPool(pool))
}

// offlineOutside is OfflineOutside for what a container or a hold keeps
// (keepable's rule).
func (l *Layout) offlineOutside(pool string, cpus cpuset.CPUSet) cpuset.CPUSet {
	return l.offlineOf(cpus).Difference(l.carvedKeepable(pool))
}

// offlineOf are the CPUs of cpus that are offline and that the pools are
// carved on.
func (l *Layout) offlineOf(cpus cpuset.CPUSet) cpuset.CPUSet {
	return cpus.Difference(l.Online).Intersection(l.Carved.Usable)
}

// OfflineOutsideReason says that the CPUs out (OfflineOutside) are
// offline and outside pool as the config carves it.
func (l *Layout) OfflineOutsideReason(pool string, out cpuset.CPUSet) string {
	return offlineOutsidePool(out, pool, l.carvedPool(pool))
}
