package allocator

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// Exclusive and shared CPUs in one container (shared-cpus.cpupool.dev):
// a DPDK application polls on its exclusive CPUs and runs its control and
// housekeeping threads on the shared pool. The container holds its
// exclusive CPUs like any exclusive container (placement, holds, resizes
// and the exclusive pools' accounting see only them); its cpuset is
// those plus the shared pool as it is now (Assignment.Shared), which
// follows the pool as a shared member does. Its memory nodes are those of
// its exclusive part (pinMemory): what it polls on gets local memory, and
// its control threads on a shared CPU of another node use that node's
// memory remotely.

// Cpuset is the container's cpuset as the runtime applies it: its CPUs,
// plus the shared pool's when it has asked for them.
func (a *Assignment) Cpuset() cpuset.CPUSet {
	if !a.WithShared {
		return a.CPUs
	}
	return a.CPUs.Union(a.Shared)
}

// withSharedPart gives a placed exclusive container of a request that
// asked for them the shared pool's CPUs, and lifts its CFS quota: one
// quota covers the whole cgroup, so any quota below its exclusive and
// shared CPUs together would throttle its exclusive CPUs' threads when
// its shared ones are busy, and one at or above them limits nothing (it
// is what CRI-O writes). The shared part is bounded by its cpuset and by
// CFS weights (the kubelet's cpu.shares), as every shared member is.
func (a *Allocator) withSharedPart(as *Assignment, req Request) error {
	if !req.WithShared {
		return nil
	}
	shared := a.PoolCPUs(pools.Shared)
	if shared.IsEmpty() {
		// No CPU of the pool free (every one offline, or held by
		// exclusive containers kept where they run): the shared part
		// runs where the pool's members do, less its own exclusive CPUs
		// (as readd and followInfra keep it).
		shared = a.membersWhileEmpty(pools.Shared).Difference(as.Held())
	}
	if shared.IsEmpty() && a.allOffline(pools.Shared) {
		return fmt.Errorf("every CPU of pool shared is offline, and so is every CPU of pool infra, where its members run meanwhile, and container %s asks for them (%s); it can start once one comes back online",
			req.Pod.ContainerName(req.Container), AnnotationSharedCPUs)
	}
	if shared.IsEmpty() {
		return fmt.Errorf("pool shared has no CPUs on this node, and container %s asks for them (%s); configure pools.shared or remove the annotation",
			req.Pod.ContainerName(req.Container), AnnotationSharedCPUs)
	}
	as.WithShared, as.Shared, as.NoCPUQuota = true, shared, true
	return nil
}

// FollowShared brings every container that runs on the shared pool (its
// members, and the shared part of exclusive containers that asked for it)
// to the pool as it is now, or while it has no free CPU to infra
// (MembersCPUs), and returns those that moved. The pool changes only when
// the plugin starts again with another config, or an exclusive container
// kept where it ran after such a change holds one of its CPUs: Synchronize
// calls it once every container is placed, as one readmitted before such
// a container got the pool as it was then. Left on CPUs an exclusive
// container holds, or the config made exclusive, they would share them
// with it or with the next container given them.
func (a *Allocator) FollowShared() []Assignment {
	now := a.MembersCPUs(pools.Shared)
	var moved []Assignment
	for _, id := range a.sortedIDs() {
		if a.followShared(a.containers[id], now) {
			moved = append(moved, *a.containers[id])
		}
	}
	return moved
}
