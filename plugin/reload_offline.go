package plugin

// A reload while CPUs that someone owns are offline: a running exclusive
// container's, a stopped container's hold, a kubelet allocation's or a
// prepared DRA claim's. The new layout is carved for the online CPUs, so it
// has no pool for an offline one; which pool the CPU joins is decided when
// it comes back online (allocator.HotplugLayout), by the config then in
// force and the node as it is then. A reload that lets it join another
// pool than its owner's breaks a promise the plugin made: the allocation's
// container is refused at creation, or an exclusive container shares its
// CPU with the shared pool's members and every later reload of the config
// in force is refused. The plugin's memory of what it handed out is the
// truth here, not the online mask.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// offlineBlockers are the owners of offline CPUs (not online in layout)
// that the reload from old to cfg could give to another pool when they
// come back. A CPU is safe when the reload cannot change where it rejoins:
// the keys that place CPUs in pools are unchanged (placementKeyChanges: a
// SIGHUP of the file in force, a change of other keys), or cfg lists it in its owner's pool.
// Anything else, a count above all, cannot be judged while the CPU is
// offline: the carving ranks CPUs by what the kernel tells of them
// (core, cache, base frequency), which it does not tell of an offline
// one. A CPU the hypervisor hot-removed (not in topo.Present, or put
// back at its remembered place: topo.Absent) is not judged: the reload it
// would refuse is the one that fits the config to the node without it
// for good, which cannot list it in a pool (hotplug_removed.go). It comes back only by a hot-add, as a CPU the
// config then in force places; while its owner lives it is still the
// owner's then, and the pools' members stay off it (allocator's
// poolLessHeld), as they do off any CPU an exclusive container keeps
// outside its pool after a config change. Already names the owners
// refused for other CPUs: listed once. Called under the lock.
func (p *Plugin) offlineBlockers(old, cfg *config.Config, topo *sysfs.Topology, layout *allocator.Layout, already []allocator.Blocker) []allocator.Blocker {
	changed := placementKeyChanges(old, cfg)
	if len(changed) == 0 {
		return nil
	}
	listed := func(pool string, cpus cpuset.CPUSet) cpuset.CPUSet {
		list := ""
		switch pool {
		case pools.Exclusive:
			list = cfg.Pools.Exclusive.CPUs
		case pools.Shared:
			list = cfg.Pools.Shared.CPUs
		}
		set, err := config.ParseCPUList(list)
		if err != nil {
			return cpus
		}
		return cpus.Difference(set)
	}
	seen := map[string]bool{}
	for _, b := range already {
		seen[b.Who] = true
	}
	var out []allocator.Blocker
	add := func(b allocator.Blocker, owned cpuset.CPUSet) {
		off := listed(b.Pool, owned.Difference(layout.Online).Intersection(topo.Present).Difference(topo.Absent))
		if off.IsEmpty() || seen[b.Who] {
			return
		}
		seen[b.Who] = true
		b.CPUs = off
		notListed := fmt.Sprintf("does not list %s in pools.%s.cpus", plural.Verb(off.Size(), "it", "them"), b.Pool)
		if b.Pool == pools.ExclusiveNonIsolcpus {
			// No list names the pool's CPUs (they are infra's, lent):
			// only keeping the keys that place CPUs as they are is safe.
			notListed = "no list names exclusive-non-isolcpus CPUs, so keep those keys as they are"
		}
		b.Reason = fmt.Sprintf("%s %s offline, and which pool %s when %s online cannot be checked while %s offline: the new config changes %s (which place CPUs in pools), and %s; bring %s online and reload again, or reload once %s",
			plural.CPUs(off), plural.Verb(off.Size(), "is", "are"), plural.Verb(off.Size(), "it joins", "they join"), plural.Verb(off.Size(), "it comes", "they come"),
			plural.Verb(off.Size(), "it is", "they are"), strings.Join(changed, ", "), notListed, plural.Verb(off.Size(), "it", "them"), b.Reason)
		out = append(out, b)
	}
	// A hide-hyperthreads owner's offline siblings that join its pool
	// when they come online are its hidden ones then; one that joins
	// another pool under the config in force is not its, and the reload
	// cannot take it from it (allocator.OfflineHiddenSiblings).
	owned := func(a *allocator.Assignment) cpuset.CPUSet {
		return a.Held().Union(p.alloc.OfflineHiddenSiblings(a))
	}
	for _, a := range p.alloc.Assignments() {
		if pools.IsExclusive(a.Pool) {
			add(allocator.Blocker{Who: a.Pod.ContainerName(a.Container), ID: a.ID, Pool: a.Pool, Reason: "the container ends"}, owned(&a))
		}
	}
	for _, h := range p.alloc.Holds() {
		add(allocator.Blocker{Who: h.Pod.ContainerName(h.Container), ID: h.ID, Pool: h.Pool, Held: true, Reason: "its pod ends"}, owned(&h.Assignment))
	}
	for _, tok := range slices.Sorted(maps.Keys(p.grants.byToken)) {
		if g := p.grants.byToken[tok]; g.PodUID == "" {
			add(allocator.Blocker{Who: "kubelet allocation " + tok, Pool: pools.Exclusive, Pending: true,
				Reason: fmt.Sprintf("the container the kubelet allocated CPUs %s for as %s devices is created", g.CPUs, config.ResourceExclusive)}, g.cpusOf())
		}
	}
	if p.claims != nil {
		for _, c := range p.claims.Pending() {
			add(allocator.Blocker{Who: "DRA claim " + c.Claim, Pool: c.Pool, Pending: true,
				Reason: "the claim's container has started"}, c.CPUs)
		}
	}
	return out
}

// placementKeyChanges names the keys that decide which pool a CPU is in
// (allocator's layout builder: isolatedAndReserved, listedPools,
// carvePools, lendable) whose value differs between a and b, on the same
// node. None means a CPU rejoins the same pool under either. The other
// keys under pools (irqIsolation, housekeeping, isolatedPartition,
// minInfraCPUs) tune what a pool's CPUs get, not which CPUs it has. Lists
// are compared as CPU sets ("2-3" is "2,3"); one that does not parse is
// compared as written.
func placementKeyChanges(a, b *config.Config) []string {
	var out []string
	list := func(key, x, y string) {
		if !sameCPUList(x, y) {
			out = append(out, key)
		}
	}
	switch {
	case (a.IsolatedCPUs == nil) != (b.IsolatedCPUs == nil):
		out = append(out, "isolatedCPUs")
	case a.IsolatedCPUs != nil:
		list("isolatedCPUs", *a.IsolatedCPUs, *b.IsolatedCPUs)
	}
	list("reservedCPUs", a.ReservedCPUs, b.ReservedCPUs)
	list("pools.exclusive.cpus", a.Pools.Exclusive.CPUs, b.Pools.Exclusive.CPUs)
	if a.Pools.Exclusive.Count != b.Pools.Exclusive.Count {
		out = append(out, "pools.exclusive.count")
	}
	list("pools.shared.cpus", a.Pools.Shared.CPUs, b.Pools.Shared.CPUs)
	if a.Pools.Shared.Count != b.Pools.Shared.Count {
		out = append(out, "pools.shared.count")
	}
	if a.Pools.ExclusiveNonIsolcpus.Enabled != b.Pools.ExclusiveNonIsolcpus.Enabled {
		out = append(out, "pools.exclusive-non-isolcpus.enabled")
	}
	return out
}

// sameCPUList tells whether two CPU lists name the same CPUs.
func sameCPUList(x, y string) bool {
	if x == y {
		return true
	}
	xs, errX := config.ParseCPUList(x)
	ys, errY := config.ParseCPUList(y)
	return errX == nil && errY == nil && xs.Equals(ys)
}
