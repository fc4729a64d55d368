package allocator

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
)

// The kubelet route: the kubelet's device manager chooses which exclusive
// CPUs a container gets (helped by Preferred) and the allocator only checks
// and records that choice (Request.CPUs), so that the kubelet's accounting,
// its checkpoint and the real cpuset agree.

// kubeletDecides tells whether as's CPUs are those the kubelet chose (its
// cpupool.dev/exclusive devices, or a DRA claim's CPUs): its checkpoint
// keeps them for the pod's life, and every run of the container comes
// with them again, whatever the config in force says now.
func kubeletDecides(as *Assignment) bool {
	return as.Rule.Kind == RuleDevicePlugin || as.Rule.Kind == RuleClaim
}

// placeExact checks CPUs the kubelet allocated: all in the pool, online and
// held by nobody. A CPU of the pod's own hold that is offline is the one
// exception: the container restarts on the others and keeps it, as a
// running container keeps a CPU the kernel took offline under it (it is
// its own, handed to no one else, and given back when it comes online),
// so that a restart never waits for a CPU to come back.
func (a *Allocator) placeExact(req Request) (cpuset.CPUSet, error) {
	who := "container " + req.Pod.ContainerName(req.Container)
	// The pod's own holds (this container's last run, a completed init
	// container) are its to reuse, as the kubelet reuses their devices:
	// also when the pool as now configured no longer has them (a restart
	// with another config, or an upgrade that lends fewer CPUs), since the
	// pod runs there already and nothing running moves.
	reusable := a.reusableFor(req)
	ids, online := req.CPUs.List(), 0
	for _, id := range ids {
		switch {
		case a.x.online(id):
			online++
		case !reusable.Contains(id):
			// Offline, so in no pool: said as it is.
			return cpuset.New(), fmt.Errorf("%s was given CPU %d by the kubelet, which is not online", who, id)
		}
	}
	if online == 0 {
		return cpuset.New(), fmt.Errorf("%s was given %s by the kubelet, held for its pod, and none of them is online: it can run again once one comes back online", who, plural.CPUs(req.CPUs))
	}
	if out := req.CPUs.Difference(a.layout.Pool(req.Pool)).Difference(reusable); !out.IsEmpty() {
		return cpuset.New(), fmt.Errorf("%s was given %s by the kubelet, outside %s as now configured", who, plural.CPUs(out), poolAsConfigured(req.Pool, a.layout.Pool(req.Pool)))
	}
	for _, id := range ids {
		if o := a.owner[id]; o != "" && !reusable.Contains(id) {
			if req.Rule.Kind == RuleClaim {
				// Not the kubelet's device manager, and no pod of
				// the claim's is ending: another container runs there.
				return cpuset.New(), fmt.Errorf("%s was given CPU %d by its %s, but container %s, not the claim's, holds it (one the runtime ran there while the claim was not known to be prepared, e.g. across a restart); the kubelet retries the creation, which gets the CPU once that container is gone: delete its pod",
					who, id, req.Rule.Detail, o)
			}
			return cpuset.New(), fmt.Errorf("%s was given CPU %d by the kubelet, but container %s still holds it (its pod is ending; the kubelet retries the creation)", who, id, o)
		}
	}
	return req.CPUs, nil
}

// preferredSentinel marks CPUs Preferred must not choose while it plans.
const preferredSentinel = "\x00unavailable"

// Preferred chooses size CPUs of an exclusive pool among available,
// including mustInclude, by the placement rules (fewest NUMA nodes, whole
// cores, fewest L3 groups...), as the kubelet's GetPreferredAllocation asks.
// It changes nothing.
func (a *Allocator) Preferred(pool string, available, mustInclude cpuset.CPUSet, size int, opts config.Allocation) (cpuset.CPUSet, error) {
	if !pools.IsExclusive(pool) {
		return cpuset.New(), fmt.Errorf("pool %s is not exclusive", pool)
	}
	if !available.IsSubsetOf(a.layout.Pool(pool)) {
		return cpuset.New(), fmt.Errorf("CPUs %s are not in pool %s (%s)", available.Difference(a.layout.Pool(pool)), pool, a.layout.Pool(pool))
	}
	if !mustInclude.IsSubsetOf(available) {
		return cpuset.New(), fmt.Errorf("must-include CPUs %s are not all available (%s)", mustInclude, available)
	}
	if mustInclude.Size() >= size {
		return mustInclude, nil
	}
	// The kubelet's view decides what is available (a CPU of a pod it is
	// ending may still be held here): plan over exactly what it offers,
	// minus what is already chosen, then restore the owners.
	members := a.layout.Pool(pool).List()
	saved := make([]string, len(members))
	for i, id := range members {
		saved[i] = a.owner[id]
		if available.Contains(id) && !mustInclude.Contains(id) {
			a.setOwner(id, "")
		} else {
			a.setOwner(id, preferredSentinel)
		}
	}
	defer func() {
		for i, id := range members {
			a.setOwner(id, saved[i])
		}
	}()
	opts.HideHyperthreads, opts.FullPCPUsOnly = false, false // one device is one CPU
	prefer := cpuset.New()
	for _, id := range mustInclude.UnsortedList() {
		prefer = prefer.Union(cpuset.New(a.x.cpus[id].numa))
	}
	req := Request{Pool: pool, Container: "(preferred allocation)", MilliCPU: int64(size-mustInclude.Size()) * 1000,
		Options: opts, NUMANodes: cpuset.New(), PreferNUMA: prefer}
	cpus, _, err := a.placeExclusive(req)
	if err != nil {
		return cpuset.New(), err
	}
	return cpus.Union(mustInclude), nil
}
