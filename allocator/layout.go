package allocator

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Layout is the static carving of the node's online CPUs into pools.
// Exclusive-non-isolcpus CPUs are lent out of infra at run time, so infra
// here is the most it can ever be.
type Layout struct {
	Online   cpuset.CPUSet
	Isolated cpuset.CPUSet
	Reserved cpuset.CPUSet
	// Exclusive and Shared are carved from the isolated CPUs by default.
	Exclusive cpuset.CPUSet
	Shared    cpuset.CPUSet
	// Infra is every online CPU that is neither exclusive nor shared.
	Infra cpuset.CPUSet
	// ExclusiveNonIsolcpus are the infra CPUs that may be lent out
	// exclusively (infra minus reserved), empty when the pool is disabled.
	ExclusiveNonIsolcpus cpuset.CPUSet
	// MinInfraCPUs is how many CPUs infra keeps in any case.
	MinInfraCPUs int
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
// usable when none of them is an error.
func BuildLayout(topo *sysfs.Topology, cfg *config.Config) (*Layout, config.Problems) {
	// Warnings about the config alone (errors stopped it loading) come first.
	p := cfg.Check().Warnings()
	x := newIndex(topo)
	l := &Layout{Online: topo.Online, MinInfraCPUs: cfg.Pools.ExclusiveNonIsolcpus.MinInfraCPUs}

	// checked parses a list key and keeps only online CPUs, reporting the rest.
	checked := func(key, list string) cpuset.CPUSet {
		set, err := config.ParseCPUList(list)
		if err != nil {
			p.Errorf(key, "%v", err)
			return cpuset.New()
		}
		if missing := set.Difference(topo.Present); !missing.IsEmpty() {
			p.Errorf(key, "CPUs %s do not exist on this node (present: %s); list only existing CPUs", missing, topo.Present)
		}
		if off := set.Intersection(topo.Offline); !off.IsEmpty() {
			p.Errorf(key, "CPUs %s are offline (online: %s); bring them online or remove them from the list", off, topo.Online)
		}
		return set.Intersection(topo.Online)
	}

	if cfg.IsolatedCPUs != nil {
		l.Isolated = checked("isolatedCPUs", *cfg.IsolatedCPUs)
	} else {
		l.Isolated = topo.Isolated.Intersection(topo.Online)
		if off := topo.Isolated.Difference(topo.Online); !off.IsEmpty() {
			p.Warnf("isolatedCPUs", "the kernel isolates offline CPUs %s; they are ignored", off)
		}
	}
	l.Reserved = checked("reservedCPUs", cfg.ReservedCPUs)

	ex := cfg.Pools.Exclusive
	sh := cfg.Pools.Shared
	exCPUs := checked("pools.exclusive.cpus", ex.CPUs)
	shCPUs := checked("pools.shared.cpus", sh.CPUs)
	overlap := func(aKey, bKey string, a, b cpuset.CPUSet) {
		if o := a.Intersection(b); !o.IsEmpty() {
			p.Errorf(aKey, "overlaps %s on CPUs %s; a CPU belongs to one pool", bKey, o)
		}
	}
	overlap("pools.exclusive.cpus", "pools.shared.cpus", exCPUs, shCPUs)
	overlap("pools.exclusive.cpus", "reservedCPUs", exCPUs, l.Reserved)
	overlap("pools.shared.cpus", "reservedCPUs", shCPUs, l.Reserved)

	// Counts are carved from what is isolated and not already taken.
	carvable := l.Isolated.Difference(l.Reserved).Difference(exCPUs).Difference(shCPUs)
	carve := func(key string, count int) cpuset.CPUSet {
		if count == 0 {
			return cpuset.New()
		}
		if count > carvable.Size() {
			source := "isolatedCPUs"
			if cfg.IsolatedCPUs == nil {
				source = "the kernel's isolated CPUs (isolcpus=)"
			}
			p.Errorf(key, "asks for %d CPUs but only %d are left to carve (%s %q, minus reservedCPUs and the other pool); lower the count or isolate more CPUs",
				count, carvable.Size(), source, l.Isolated.String())
			return cpuset.New()
		}
		set := carveByCount(x, carvable, count)
		carvable = carvable.Difference(set)
		return set
	}
	if ex.CPUs != "" || ex.Count > 0 {
		l.Exclusive = exCPUs.Union(carve("pools.exclusive.count", ex.Count))
		l.Shared = shCPUs.Union(carve("pools.shared.count", sh.Count))
	} else {
		// An unsized exclusive pool gets every isolated CPU shared leaves.
		l.Shared = shCPUs.Union(carve("pools.shared.count", sh.Count))
		l.Exclusive = carvable
		carvable = cpuset.New()
	}
	if !carvable.IsEmpty() {
		p.Warnf("pools", "isolated CPUs %s are in neither exclusive nor shared, so they join infra, where the kernel does not balance load across isolated CPUs", carvable)
	}
	for _, pool := range []struct {
		key  string
		cpus cpuset.CPUSet
	}{{"pools.exclusive.cpus", exCPUs}, {"pools.shared.cpus", shCPUs}} {
		if notIso := pool.cpus.Difference(l.Isolated); !notIso.IsEmpty() {
			p.Warnf(pool.key, "CPUs %s are not isolated, so kernel threads and other tasks may run there too", notIso)
		}
	}

	l.Infra = topo.Online.Difference(l.Exclusive).Difference(l.Shared)
	if l.Infra.IsEmpty() {
		p.Errorf("pools", "no CPU is left for infra (online %s, exclusive %s, shared %s); leave at least one CPU (reservedCPUs keeps some)", topo.Online, l.Exclusive, l.Shared)
	}
	if cfg.Pools.ExclusiveNonIsolcpus.Enabled {
		l.ExclusiveNonIsolcpus = l.Infra.Difference(l.Reserved)
		if l.Infra.Size() <= l.MinInfraCPUs {
			p.Warnf("pools.exclusive-non-isolcpus", "enabled, but infra (%s) has no CPU to lend beyond minInfraCPUs=%d", l.Infra, l.MinInfraCPUs)
		}
	} else {
		l.ExclusiveNonIsolcpus = cpuset.New()
	}
	for _, pool := range []struct {
		key  string
		cpus cpuset.CPUSet
	}{{"pools.exclusive", l.Exclusive}, {"pools.shared", l.Shared}} {
		if split := splitCores(x, pool.cpus); !split.IsEmpty() {
			p.Warnf(pool.key, "splits the hyperthreads of cores with CPUs %s with another pool, so their siblings' load disturbs it", split)
		}
	}
	return l, p
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
