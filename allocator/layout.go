package allocator

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Layout is the static carving of the node's online CPUs into pools: the
// pools are carved on the present CPUs and hold the online ones.
// Exclusive-non-isolcpus CPUs are lent out of infra at run time, so infra
// here is the most it can ever be.
type Layout struct {
	Online   cpuset.CPUSet
	Isolated cpuset.CPUSet
	Reserved cpuset.CPUSet
	// Exclusive and Shared are carved from the isolated CPUs by default.
	Exclusive cpuset.CPUSet
	Shared    cpuset.CPUSet
	// SharedCarved is the shared pool as the config carves it on the
	// present CPUs, offline ones included: a shared pool without an online
	// CPU whose SharedCarved is not empty is empty only while its CPUs are
	// offline, and its members run on infra meanwhile (membersWhileEmpty);
	// one the config leaves empty has none to run on.
	SharedCarved cpuset.CPUSet
	// carved is the rest of the carving on the present CPUs, offline
	// ones included: where an offline CPU goes when it comes online
	// (HotplugLayout), as far as the config in force tells now. A
	// hide-hyperthreads container's offline sibling is its hidden one
	// only when it joins its pool then (OfflineHiddenSiblings), and
	// such a container takes a core only then (take.go, hideable).
	carved carvedPools
	// Infra is every online CPU that is neither exclusive nor shared.
	Infra cpuset.CPUSet
	// ExclusiveNonIsolcpus are the infra CPUs that may be lent out
	// exclusively (infra minus reserved and isolated), empty when the
	// pool is disabled.
	ExclusiveNonIsolcpus cpuset.CPUSet
	// LendsNonIsolcpus tells that pools.exclusive-non-isolcpus is
	// enabled, also when it has no CPU to lend now (keepable).
	LendsNonIsolcpus bool
	// MinInfraCPUs is how many CPUs infra keeps in any case, counting
	// those the kernel balances load on (not isolated): the host's
	// processes and infra's containers need them, and an isolated CPU
	// left to infra is no substitute (review 59).
	MinInfraCPUs int
	// MemoryReserve is the memory in bytes, and HugePagesReserve the
	// pages by size in KiB, of each NUMA node kept for the host
	// (memory.reservedPerNode, memory.reservedHugePagesPerNode).
	MemoryReserve    int64
	HugePagesReserve map[int64]int64
}

// carvedPools are the sets of a layout carved on the present CPUs,
// before dropOffline. whileFailing tells that they are not the config's
// carving but carvingWhileFailing's (the config does not fit the node as
// it is), which says where an offline CPU goes, not whose it is.
type carvedPools struct {
	exclusive, infra, reserved, isolated cpuset.CPUSet
	whileFailing                         bool
}

// carvedPool is an exclusive pool as the config carves it on the present
// CPUs, offline ones included: the CPUs a new container may be given
// (the pool's view), or with keep those a running one may keep
// (keepable), once they are online.
func (l *Layout) carvedPool(pool string, keep bool) cpuset.CPUSet {
	switch {
	case pool == pools.Exclusive:
		return l.carved.exclusive
	case pool != pools.ExclusiveNonIsolcpus || !l.LendsNonIsolcpus:
		return cpuset.New()
	}
	lent := lendableCPUs(l.carved.infra, l.carved.reserved, l.carved.isolated)
	if !keep {
		return lent
	}
	return lent.Union(l.carved.infra.Intersection(l.carved.isolated).Difference(l.carved.reserved))
}

// carvedElsewhere are those of cpus the config carves on the present CPUs
// into a pool other than pool (see carvedPool): CPUs it does not carve at
// all (offline ones where nothing is carved on them, smt/control off)
// are not counted, as nothing says they are another pool's.
func (l *Layout) carvedElsewhere(pool string, cpus cpuset.CPUSet) cpuset.CPUSet {
	all := l.carved.exclusive.Union(l.carved.infra).Union(l.SharedCarved)
	return cpus.Intersection(all).Difference(l.carvedPool(pool, true))
}

// Pool returns a pool's static CPUs by name.
func (l *Layout) Pool(name string) cpuset.CPUSet {
	switch name {
	case pools.Exclusive:
		return l.Exclusive
	case pools.Shared:
		return l.Shared
	case pools.Infra:
		return l.Infra
	case pools.ExclusiveNonIsolcpus:
		return l.ExclusiveNonIsolcpus
	}
	return cpuset.New()
}

// BuildLayout turns the configuration into concrete pools for this node.
// It is deterministic: the same topology and config give the same layout.
// Every problem found is returned, with its config key; the layout is only
// usable when none of them is an error. The steps below run in this order,
// which is also the order of the problems they report.
func BuildLayout(topo *sysfs.Topology, cfg *config.Config) (*Layout, config.Problems) {
	return buildLayout(topo, cfg, false)
}

// BuildLayoutRunning is BuildLayout as the daemon judges a config (its
// start, a reload, a CPU that came online, and validate, which the unit
// runs before it: config/nodecheck): a listed CPU that is offline now is
// a warning, not an error. The kernel took it offline (under a running
// daemon, or a node rebooted with a failed core), and the daemon follows
// it back online (HotplugLayout); a daemon that refused to start would
// leave every container unpinned.
func BuildLayoutRunning(topo *sysfs.Topology, cfg *config.Config) (*Layout, config.Problems) {
	return buildLayout(topo, cfg, true)
}

func buildLayout(topo *sysfs.Topology, cfg *config.Config, offlineListed bool) (*Layout, config.Problems) {
	b := &layoutBuilder{topo: topo, cfg: cfg, x: newIndex(topo), offlineListed: offlineListed,
		l: &Layout{Online: topo.Online, MinInfraCPUs: cfg.Pools.ExclusiveNonIsolcpus.MinInfraCPUs,
			MemoryReserve: cfg.Memory.ReservedBytes(), HugePagesReserve: cfg.Memory.ReservedPages()},
		// Warnings about the config alone (errors stopped it loading) come first.
		p: cfg.Check().Warnings(),
	}
	b.present, b.usable = b.x, topo.Online
	if whole := presentTopology(topo); whole != topo {
		b.present, b.usable = newIndex(whole), topo.Present
	}
	b.absent()
	b.isolatedAndReserved()
	exCPUs, shCPUs := b.listedPools()
	b.carvePools(exCPUs, shCPUs)
	b.warnNothingIsolated()
	b.dropOffline()
	b.warnUnbalancedShared()
	b.infra()
	b.lendable()
	b.checkDefaultPool()
	b.warnSplitCores()
	b.warnMemoryReserve()
	return b.l, b.p
}

// layoutBuilder holds what BuildLayout's steps share: the layout so far and
// the problems found so far.
type layoutBuilder struct {
	topo *sysfs.Topology
	cfg  *config.Config
	x    *index
	// present is the index of the node as if every present CPU were
	// online (presentTopology): the pools are carved on it, then lose
	// the offline CPUs (dropOffline), so that a CPU being offline at a
	// start or a reload changes no other CPU's pool. It is x when every
	// CPU is online.
	present *index
	// usable are the CPUs the pools are carved on: the present ones, or
	// the online ones where the offline ones can never come online
	// (presentTopology).
	usable cpuset.CPUSet
	l      *Layout
	p      config.Problems
	// offlineListed makes offline CPUs in a list a warning
	// (BuildLayoutRunning).
	offlineListed bool
	// carved are the exclusive and shared pools as carved on the present
	// CPUs, before dropOffline: whether a pool is empty by the config or
	// only while its CPUs are offline (checkDefaultPool).
	carved struct{ exclusive, shared, reserved, isolated cpuset.CPUSet }
}

// checked parses a list key and keeps the present CPUs, reporting the
// rest, and the offline ones.
func (b *layoutBuilder) checked(key, list string) cpuset.CPUSet {
	set, err := config.ParseCPUList(list)
	if err != nil {
		b.p.Errorf(key, "%v", err)
		return cpuset.New()
	}
	if missing := set.Difference(b.topo.Present); !missing.IsEmpty() {
		b.p.Errorf(key, "%s %s exist on this node (present: %s); list only existing CPUs", plural.CPUs(missing), plural.Verb(missing.Size(), "does not", "do not"), b.topo.Present)
	}
	// A hot-removed CPU put back at its place (sysfs.WithRemembered) is
	// said once for the whole config (absent), not by each list.
	if off := set.Intersection(b.topo.Offline).Difference(b.topo.Absent); !off.IsEmpty() && b.offlineListed {
		b.p.Warnf(key, "%s %s offline (online: %s); the daemon runs without %s and %s the pool when %s online; if %s gone for good, remove %s from the list",
			plural.CPUs(off), plural.Verb(off.Size(), "is", "are"), b.topo.Online, plural.Verb(off.Size(), "it", "them"), plural.Verb(off.Size(), "it joins", "they join"),
			plural.Verb(off.Size(), "it comes", "they come"), plural.Verb(off.Size(), "it is", "they are"), plural.Verb(off.Size(), "it", "them"))
	} else if off := set.Intersection(b.topo.Offline); !off.IsEmpty() && !b.offlineListed {
		b.p.Errorf(key, "%s %s offline (online: %s); bring %s online or remove %s from the list", plural.CPUs(off), plural.Verb(off.Size(), "is", "are"), b.topo.Online,
			plural.Verb(off.Size(), "it", "them"), plural.Verb(off.Size(), "it", "them"))
	}
	return set.Intersection(b.usable)
}

// absent says once that the pools are laid out with CPUs the hypervisor
// hot-removed, put back as offline CPUs at the place they had while
// present (sysfs.Topology.WithRemembered): as the running daemon had
// them, so that a restart or a reload with the same config moves no one.
func (b *layoutBuilder) absent() {
	gone := b.topo.Absent
	if gone.IsEmpty() || !b.offlineListed {
		return
	}
	n := gone.Size()
	b.p.Warnf("pools", "%s %s configured but not present (hot-removed): %s laid out in %s pools as offline %s, at the place %s had while present, and %s %s when the hypervisor adds %s back; if %s gone for good, remove %s from the config's lists",
		plural.CPUs(gone), plural.Verb(n, "is", "are"), plural.Verb(n, "it is", "they are"), plural.Verb(n, "its", "their"), plural.Verb(n, "CPU", "CPUs"),
		plural.Verb(n, "it", "they"), plural.Verb(n, "it joins", "they join"), plural.Verb(n, "it", "them"), plural.Verb(n, "it", "them"),
		plural.Verb(n, "it is", "they are"), plural.Verb(n, "it", "them"))
}

// isolatedAndReserved decides the isolated set (the config's, else the
// kernel's) and the reserved CPUs.
func (b *layoutBuilder) isolatedAndReserved() {
	if b.cfg.IsolatedCPUs != nil {
		b.l.Isolated = b.checked("isolatedCPUs", *b.cfg.IsolatedCPUs)
	} else {
		b.l.Isolated = b.topo.Isolated.Intersection(b.usable)
		if off := b.topo.Isolated.Intersection(b.topo.Offline); !off.IsEmpty() {
			b.p.Warnf("isolatedCPUs", "the kernel isolates offline %s; %s %s pool when %s online", plural.CPUs(off),
				plural.Verb(off.Size(), "it joins", "they join"), plural.Verb(off.Size(), "its", "their"), plural.Verb(off.Size(), "it comes", "they come"))
		}
	}
	b.l.Reserved = b.checked("reservedCPUs", b.cfg.ReservedCPUs)
}

// listedPools returns the CPUs the config lists for exclusive and shared,
// and reports lists that overlap each other or the reserved CPUs.
func (b *layoutBuilder) listedPools() (exclusive, shared cpuset.CPUSet) {
	exclusive = b.checked("pools.exclusive.cpus", b.cfg.Pools.Exclusive.CPUs)
	shared = b.checked("pools.shared.cpus", b.cfg.Pools.Shared.CPUs)
	overlap := func(aKey, bKey string, x, y cpuset.CPUSet) {
		if o := x.Intersection(y); !o.IsEmpty() {
			b.p.Errorf(aKey, "overlaps %s on %s; a CPU belongs to one pool", bKey, plural.CPUs(o))
		}
	}
	overlap("pools.exclusive.cpus", "pools.shared.cpus", exclusive, shared)
	overlap("pools.exclusive.cpus", "reservedCPUs", exclusive, b.l.Reserved)
	overlap("pools.shared.cpus", "reservedCPUs", shared, b.l.Reserved)
	return exclusive, shared
}

// carvePools completes exclusive and shared: the listed CPUs plus counts
// carved from the isolated CPUs nobody took; an unsized exclusive pool gets
// every isolated CPU shared leaves. It works on the present CPUs, offline
// ones included: a count that fits them is never an error because some
// are offline.
func (b *layoutBuilder) carvePools(exCPUs, shCPUs cpuset.CPUSet) {
	ex, sh := b.cfg.Pools.Exclusive, b.cfg.Pools.Shared
	carvable := b.l.Isolated.Difference(b.l.Reserved).Difference(exCPUs).Difference(shCPUs)
	carve := func(key string, count int) cpuset.CPUSet {
		set := b.carve(key, count, carvable)
		carvable = carvable.Difference(set)
		return set
	}
	if ex.CPUs != "" || ex.Count > 0 {
		b.l.Exclusive = exCPUs.Union(carve("pools.exclusive.count", ex.Count))
		b.l.Shared = shCPUs.Union(carve("pools.shared.count", sh.Count))
	} else {
		b.l.Shared = shCPUs.Union(carve("pools.shared.count", sh.Count))
		b.l.Exclusive = carvable
		carvable = cpuset.New()
	}
	if !carvable.IsEmpty() {
		lent := ""
		if b.cfg.Pools.ExclusiveNonIsolcpus.Enabled {
			lent = plural.Verb(carvable.Size(), "; exclusive-non-isolcpus never lends it", "; exclusive-non-isolcpus never lends them")
		}
		b.p.Warnf("pools", "isolated %s %s in neither exclusive nor shared, so %s infra, where the kernel does not balance load across isolated CPUs%s",
			plural.CPUs(carvable), plural.Verb(carvable.Size(), "is", "are"), plural.Verb(carvable.Size(), "it joins", "they join"), lent)
	}
	for _, pool := range []struct {
		key  string
		cpus cpuset.CPUSet
	}{{"pools.exclusive.cpus", exCPUs}, {"pools.shared.cpus", shCPUs}} {
		if notIso := pool.cpus.Difference(b.l.Isolated); !notIso.IsEmpty() {
			b.p.Warnf(pool.key, "%s %s not isolated, so kernel threads and other tasks may run there too", plural.CPUs(notIso), plural.Verb(notIso.Size(), "is", "are"))
		}
	}
}

// warnNothingIsolated reports an exclusive pool left empty because the
// kernel isolates no CPU (a node booted without isolcpus=): every
// container that asks for exclusive CPUs would be refused, which the
// operator should learn from validate, topology and the daemon's start,
// not from the first refused pod. An exclusive pool the config empties
// itself (isolatedCPUs: "", or shared taking every isolated CPU) is the
// operator's choice and is not reported.
func (b *layoutBuilder) warnNothingIsolated() {
	ex := b.cfg.Pools.Exclusive
	if b.cfg.IsolatedCPUs != nil || ex.CPUs != "" || ex.Count > 0 || !b.l.Isolated.IsEmpty() || !b.l.Exclusive.IsEmpty() {
		return
	}
	example := b.usable.Difference(b.l.Reserved)
	if first := b.usable.List(); len(first) > 0 && b.present.cpus[first[0]].present {
		// Keep the first core (its threads) for the host in the example.
		for _, sib := range b.present.cores[b.present.cpus[first[0]].core] {
			example = example.Difference(cpuset.New(sib))
		}
	}
	list := "<cpus>"
	if !example.IsEmpty() {
		list = example.String()
	}
	eni := "or enable pools.exclusive-non-isolcpus to lend infra CPUs to containers that ask for that pool"
	if b.cfg.Pools.ExclusiveNonIsolcpus.Enabled {
		eni = "or have containers ask for pools.exclusive-non-isolcpus (enabled) instead"
	}
	b.p.Warnf("pools.exclusive", "is empty: the kernel isolates no CPU (no isolcpus= or nohz_full= on the kernel command line), so every container that asks for the exclusive pool is refused; boot with isolcpus=managed_irq,%s nohz_full=%s, or name CPUs in isolatedCPUs or pools.exclusive.cpus, %s (isolatedCPUs: \"\" says no CPU is isolated on purpose, without this warning)",
		list, list, eni)
}

// carve takes count CPUs from carvable, or reports why it cannot.
func (b *layoutBuilder) carve(key string, count int, carvable cpuset.CPUSet) cpuset.CPUSet {
	if count == 0 {
		return cpuset.New()
	}
	if count > carvable.Size() {
		if b.l.Isolated.IsEmpty() {
			// Not `(isolcpus=) ""`: say that nothing is isolated, and how
			// to isolate CPUs (review 58, item 10).
			none, fix := "isolatedCPUs is empty", "name CPUs in isolatedCPUs or in the pool's cpus"
			if b.cfg.IsolatedCPUs == nil {
				none = "the kernel isolates no CPU (no isolcpus= or nohz_full= on the kernel command line)"
				fix = "boot with isolcpus= and nohz_full= naming the CPUs to isolate, or name them in isolatedCPUs or in the pool's cpus"
			}
			b.p.Errorf(key, "asks for %s but %s, and a count is carved from the isolated CPUs; %s, or remove the count", plural.Count(count, "CPU"), none, fix)
			return cpuset.New()
		}
		source := "isolatedCPUs"
		if b.cfg.IsolatedCPUs == nil {
			source = "the kernel's isolated CPUs (isolcpus=)"
		}
		b.p.Errorf(key, "asks for %s but only %d %s left to carve (%s %q, minus reservedCPUs and the other pool); lower the count or isolate more CPUs",
			plural.Count(count, "CPU"), carvable.Size(), plural.Verb(carvable.Size(), "is", "are"), source, b.l.Isolated.String())
		return cpuset.New()
	}
	return carveByCount(b.present, carvable, count)
}

// dropOffline takes the offline CPUs out of the sets carved on the
// present ones: an offline CPU is in no pool until it comes online.
func (b *layoutBuilder) dropOffline() {
	b.carved.exclusive, b.carved.shared, b.carved.reserved, b.carved.isolated = b.l.Exclusive, b.l.Shared, b.l.Reserved, b.l.Isolated
	b.l.SharedCarved = b.l.Shared
	b.l.carved = carvedPools{exclusive: b.l.Exclusive, infra: b.usable.Difference(b.l.Exclusive).Difference(b.l.Shared), reserved: b.l.Reserved, isolated: b.l.Isolated}
	for _, set := range []*cpuset.CPUSet{&b.l.Isolated, &b.l.Reserved, &b.l.Exclusive, &b.l.Shared} {
		*set = set.Intersection(b.topo.Online)
	}
}

// warnUnbalancedShared reports a shared pool of more than one CPU on CPUs
// taken out of the scheduler's load balancing (isolcpus= without flags or
// with domain): its containers' threads would stay where they start.
func (b *layoutBuilder) warnUnbalancedShared() {
	shared := b.l.Shared
	if dom := shared.Intersection(b.topo.DomainIsolated); shared.Size() > 1 && !dom.IsEmpty() {
		b.p.Warnf("pools.shared", "CPUs %s are taken out of the scheduler's load balancing (isolcpus= without flags or with the domain flag), so the threads of the shared pool's containers stay on the CPU they start on and pile up there; isolate the pool's CPUs with isolcpus=managed_irq,%s nohz_full=%s instead, or make them a cgroup v2 cpuset partition",
			dom, shared, shared)
	}
}

// infra is every online CPU the isolated pools leave; it must not be empty.
func (b *layoutBuilder) infra() {
	b.l.Infra = b.topo.Online.Difference(b.l.Exclusive).Difference(b.l.Shared)
	if b.l.Infra.IsEmpty() {
		b.p.Errorf("pools", "no CPU is left for infra (online %s, exclusive %s, shared %s); leave at least one CPU (reservedCPUs keeps some)", b.topo.Online, b.l.Exclusive, b.l.Shared)
	}
}

// lendable decides which infra CPUs exclusive-non-isolcpus may lend: not
// the reserved ones, and not the isolated CPUs that the exclusive and
// shared pools leave to infra. The pool is for containers that want CPUs
// the kernel treats as any other (balancing their threads, running its
// housekeeping there); an isolated CPU lent to one would break the
// pool's one promise (review 59: a count smaller than isolcpus=, or an
// isolated CPU that came online when the config could not be laid out,
// was lent).
func (b *layoutBuilder) lendable() {
	if !b.cfg.Pools.ExclusiveNonIsolcpus.Enabled {
		b.l.ExclusiveNonIsolcpus = cpuset.New()
		return
	}
	b.l.LendsNonIsolcpus = true
	b.l.ExclusiveNonIsolcpus = lendableCPUs(b.l.Infra, b.l.Reserved, b.l.Isolated)
	switch {
	case b.l.Balanced(b.l.Infra).Size() <= b.l.MinInfraCPUs:
		b.p.Warnf("pools.exclusive-non-isolcpus", "enabled, but infra (%s) has no CPU to lend beyond minInfraCPUs=%d not isolated", b.l.Infra, b.l.MinInfraCPUs)
	case b.l.ExclusiveNonIsolcpus.IsEmpty():
		b.p.Warnf("pools.exclusive-non-isolcpus", "enabled, but every CPU of infra (%s) is reserved or isolated, and neither is lent; leave infra CPUs that are neither", b.l.Infra)
	}
}

// Balanced are the CPUs of set that are not isolated: those minInfraCPUs
// counts.
func (l *Layout) Balanced(set cpuset.CPUSet) cpuset.CPUSet { return set.Difference(l.Isolated) }

// MaxLent is how many CPUs exclusive-non-isolcpus can lend at most: its
// lendable CPUs, down to minInfraCPUs of infra's balanced ones.
func (l *Layout) MaxLent() int {
	return max(0, min(l.ExclusiveNonIsolcpus.Size(), l.Balanced(l.Infra).Size()-l.MinInfraCPUs))
}

// lendableCPUs are the CPUs of infra that exclusive-non-isolcpus may lend:
// neither reserved nor isolated (lendable). One rule for a start, a reload
// and a CPU that comes online (HotplugLayout).
func lendableCPUs(infra, reserved, isolated cpuset.CPUSet) cpuset.CPUSet {
	return infra.Difference(reserved).Difference(isolated)
}

// checkDefaultPool refuses a defaultPool with no CPUs on this node: every
// container without a pool annotation (kube-system's too, the CNI's) would
// be refused at creation, and a reload, which moves no container, would
// apply it live. It is an error, not a warning, because nothing on such a
// node could start but the containers that ask for another pool; a start
// or a reload that refuses it keeps the node as it was and says why. A
// pool empty only because its CPUs are offline now is a warning, as every
// offline CPU is (BuildLayoutRunning): they join it when they come online,
// and a daemon that refused to start would leave every container unpinned.
func (b *layoutBuilder) checkDefaultPool() {
	pool := b.cfg.DefaultPool
	fix := "give the pool CPUs, or set defaultPool: infra"
	var now, carved cpuset.CPUSet
	switch pool {
	case pools.Shared:
		now, carved = b.l.Shared, b.carved.shared
		fix = "give pools.shared CPUs (pools.shared.cpus or pools.shared.count), or set defaultPool: infra"
	case pools.Exclusive:
		now, carved = b.l.Exclusive, b.carved.exclusive
		fix = "give pools.exclusive CPUs (isolcpus=, isolatedCPUs, pools.exclusive.cpus or pools.exclusive.count), or set defaultPool: infra"
	case pools.ExclusiveNonIsolcpus:
		if !b.cfg.Pools.ExclusiveNonIsolcpus.Enabled {
			b.p.Errorf("defaultPool", "%q is not enabled (pools.exclusive-non-isolcpus.enabled), so every container without a pool annotation would be refused, kube-system's too; enable it or set defaultPool: infra", pool)
			return
		}
		// Judged on the CPUs the pools are carved on (the present ones,
		// or the online ones where SMT is off for good), as the other
		// pools are on their carved sets: a node whose infra CPUs are
		// offline for now lends again when they come online, and a
		// start, a reload or a CPU's hotplug must not be refused for that
		// (the layout a refused hotplug falls back to would pin wrongly).
		// The reserved CPUs are the config's, offline ones too: they
		// never lend.
		infra := b.usable.Difference(b.carved.exclusive).Difference(b.carved.shared)
		switch {
		case lendableCPUs(infra, b.carved.reserved, b.carved.isolated).IsEmpty() || infra.Difference(b.carved.isolated).Size() <= b.l.MinInfraCPUs:
			b.p.Errorf("defaultPool", "%q has no CPU to lend on this node (infra %s, reserved %s, isolated %s, minInfraCPUs=%d), so every container without a pool annotation would be refused, kube-system's too; leave infra more CPUs that are neither reserved nor isolated, or set defaultPool: infra",
				pool, infra, b.carved.reserved, infra.Intersection(b.carved.isolated), b.l.MinInfraCPUs)
		case b.l.MaxLent() == 0:
			off := infra.Difference(b.l.Infra)
			b.p.Warnf("defaultPool", "%q has no CPU to lend while %s %s offline (online infra %s, minInfraCPUs=%d), so containers without a pool annotation are refused until enough come online; leave infra more CPUs or set defaultPool: infra",
				pool, plural.CPUs(off), plural.Verb(off.Size(), "is", "are"), b.l.Infra, b.l.MinInfraCPUs)
		}
		return
	default:
		return // infra is never empty (infra reports it), unknown pools are Check's
	}
	switch {
	case carved.IsEmpty():
		b.p.Errorf("defaultPool", "%q has no CPUs on this node, so every container without a pool annotation would be refused, kube-system's too; %s", pool, fix)
	case now.IsEmpty() && pool == pools.Shared:
		b.p.Warnf("defaultPool", "%q has no online CPU (its %s %s offline), so containers without a pool annotation run on infra until one comes online; %s", pool, plural.CPUs(carved), plural.Verb(carved.Size(), "is", "are"), fix)
	case now.IsEmpty():
		b.p.Warnf("defaultPool", "%q has no online CPU (its %s %s offline), so containers without a pool annotation are refused until one comes online; %s", pool, plural.CPUs(carved), plural.Verb(carved.Size(), "is", "are"), fix)
	}
}

// warnMemoryReserve reports a memory.reservedPerNode at least as large as
// a NUMA node's memory (MemTotal less its hugepage pools, what numamem
// counts as the node's capacity): no container whose memory is pinned fits
// on that node then, so each is placed by its CPUs alone with a warning that
// it may be OOM-killed (numamem/refusal.go). The usual mistake is a
// machine's reserve written for each node (200Gi on 64Gi nodes). It is a
// warning, not an error: the containers still start, pinned, as they did
// before the reserve was set.
func (b *layoutBuilder) warnMemoryReserve() {
	reserve := b.l.MemoryReserve
	if reserve <= 0 {
		return
	}
	var over []string
	smallest := int64(-1)
	for _, node := range b.topo.NUMANodes {
		if !node.HasMemory || node.MemTotalKB <= 0 {
			continue
		}
		capacity := node.MemTotalKB * 1024
		for _, hp := range node.HugePages {
			capacity -= hp.Total * hp.SizeKB * 1024
		}
		capacity = max(0, capacity)
		if smallest < 0 || capacity < smallest {
			smallest = capacity
		}
		if reserve >= capacity {
			over = append(over, fmt.Sprintf("%d (%s)", node.ID, numamem.Bytes(capacity)))
		}
	}
	if len(over) == 0 {
		return
	}
	nodes := "NUMA node " + over[0]
	if len(over) > 1 {
		nodes = "NUMA nodes " + strings.Join(over, ", ")
	}
	b.p.Warnf("memory.reservedPerNode", "%s is at least the memory of %s, less its hugepage pools: it is kept on each NUMA node, not on the whole machine, so no container whose memory is pinned (exclusive, with pinMemory) fits there, and each is placed by its CPUs alone with a warning that it may be OOM-killed; give what each node keeps for the host, below the smallest node's %s (e.g. \"2Gi\")",
		numamem.Bytes(reserve), nodes, numamem.Bytes(smallest))
}

// warnSplitCores reports isolated pools that share a core with another.
func (b *layoutBuilder) warnSplitCores() {
	for _, pool := range []struct {
		key  string
		cpus cpuset.CPUSet
	}{{"pools.exclusive", b.l.Exclusive}, {"pools.shared", b.l.Shared}} {
		if split := splitCores(b.x, pool.cpus); !split.IsEmpty() {
			b.p.Warnf(pool.key, "splits the hyperthreads of cores with CPUs %s with another pool, so their siblings' load disturbs it", split)
		}
	}
}

// splitCores returns the CPUs of the set whose core also has online threads
// outside the set.
func splitCores(x *index, set cpuset.CPUSet) cpuset.CPUSet {
	var split []int
	for _, id := range set.List() {
		for _, sib := range x.cores[x.cpus[id].core] {
			if !set.Contains(sib) {
				split = append(split, id)
				break
			}
		}
	}
	return cpuset.New(split...)
}

// carveByCount picks count CPUs from candidates: whole cores first, each
// NUMA node getting a share in proportion to its candidates, and cores with
// a higher base frequency (Intel SST-BF priority cores) first.
func carveByCount(x *index, candidates cpuset.CPUSet, count int) cpuset.CPUSet {
	v := x.view(candidates)
	caps := make([]int, len(v.nodes))
	total := 0
	for i, n := range v.nodes {
		for _, l3 := range n.l3s {
			for _, c := range l3.cores {
				caps[i] += len(c.threads)
			}
		}
		total += caps[i]
	}
	quota := proportionalShares(count, caps, total)
	var picked []int
	for i, n := range v.nodes {
		var cores []coreView
		for _, l3 := range n.l3s {
			cores = append(cores, l3.cores...)
		}
		freq := func(c coreView) int64 { return x.cpus[c.threads[0]].baseFreqKHz }
		sort.SliceStable(cores, func(a, b int) bool {
			ca, cb := cores[a], cores[b]
			if ca.complete != cb.complete {
				return ca.complete
			}
			if freq(ca) != freq(cb) {
				return freq(ca) > freq(cb)
			}
			return ca.index < cb.index
		})
		need := quota[i]
		// Whole cores while a whole core fits, then the best-fitting core
		// for the remainder so that at most one core is split.
		var rest []coreView
		for _, c := range cores {
			if need >= len(c.threads) {
				picked = append(picked, c.threads...)
				need -= len(c.threads)
			} else {
				rest = append(rest, c)
			}
		}
		if need > 0 {
			sort.SliceStable(rest, func(a, b int) bool { return len(rest[a].threads) < len(rest[b].threads) })
			for _, c := range rest {
				if len(c.threads) >= need {
					picked = append(picked, c.threads[:need]...)
					break
				}
			}
		}
	}
	return cpuset.New(picked...)
}

// proportionalShares splits count over buckets by their capacity with the
// largest-remainder method, never giving a bucket more than it holds.
func proportionalShares(count int, caps []int, total int) []int {
	shares := make([]int, len(caps))
	if total == 0 {
		return shares
	}
	type rem struct{ i, r int }
	var rems []rem
	given := 0
	for i, c := range caps {
		shares[i] = count * c / total
		given += shares[i]
		rems = append(rems, rem{i, count * c % total})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; given < count; k = (k + 1) % len(rems) {
		if i := rems[k].i; shares[i] < caps[i] {
			shares[i]++
			given++
		}
	}
	return shares
}

// Describe renders the layout in one line per pool, for logs.
func (l *Layout) Describe() string {
	return fmt.Sprintf("exclusive=%q shared=%q infra=%q exclusive-non-isolcpus=%q reserved=%q",
		l.Exclusive, l.Shared, l.Infra, l.ExclusiveNonIsolcpus, l.Reserved)
}
