package allocator

// The node as if every present CPU were online, for carving pools by
// count. A start, a reload and a CPU coming online lay the pools out on
// the present CPUs and then drop the offline ones, so that a CPU the
// kernel took offline only leaves its pool, as it does in a running
// daemon (HotplugLayout), instead of moving the carving onto other CPUs.
// The kernel removes an offline CPU's topology and cache directories and
// takes it out of its siblings' lists, so where it sits is inferred here.

import (
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// presentTopology is topo with every present CPU online. An offline CPU
// whose core is unknown is placed in the core its hardware thread number
// says, when the online cores show one numbering of their threads (x86
// numbers thread t of every core at a fixed distance from thread 0):
// beside its online siblings, or with its offline siblings as a core of
// its own; else it is a core of its own. It takes its core's socket, L3
// group and base frequency; a core with no online thread keeps its NUMA
// node (the node lists offline CPUs on x86), the socket of that node's
// CPUs, no L3 group, and the lowest base frequency of the node's CPUs, so
// that it is never taken for a priority core. Core indexes are renumbered
// by each core's lowest CPU, as Discover numbers them when all are
// online. topo itself is returned when no CPU is offline, and when SMT is
// disabled (nosmt, smt/control off): the kernel then keeps every core's
// second threads offline for good, and carving them as if online would
// give count pools fewer CPUs than their counts on a node that never
// changes. An offline CPU there cannot be told from such a thread, so the
// pools are carved on the online CPUs, as before.
func presentTopology(topo *sysfs.Topology) *sysfs.Topology {
	if topo.Offline.IsEmpty() || topo.SMTDisabled() {
		return topo
	}
	t := *topo
	t.CPUs = slices.Clone(topo.CPUs)
	t.Online, t.Offline = topo.Present, cpuset.New()
	byID := map[int]int{}
	for i := range t.CPUs {
		byID[t.CPUs[i].ID] = i
	}
	cores := map[int][]int{} // known core → its CPUs
	var unknown []int
	for _, c := range t.CPUs {
		if c.Core >= 0 {
			cores[c.Core] = append(cores[c.Core], c.ID)
		} else {
			unknown = append(unknown, c.ID)
		}
	}
	inferred := len(unknown) > 0
	pattern := threadPattern(cores)
	placed := map[int]bool{}
	// Beside its online siblings first: the cores the kernel still shows.
	for _, id := range unknown {
		if k, ok := coreOf(pattern, id, cores, byID, t.CPUs); ok {
			from := t.CPUs[byID[cores[k][0]]]
			joinCore(&t.CPUs[byID[id]], from)
			cores[k] = append(cores[k], id)
			placed[id] = true
		}
	}
	// Then whole cores of offline CPUs, each as its lowest thread's core.
	next := 0
	for k := range cores {
		next = max(next, k+1)
	}
	for _, id := range unknown {
		if placed[id] {
			continue
		}
		members := []int{id}
		if len(pattern) > 1 {
			members = members[:0]
			for _, off := range pattern {
				m, ok := byID[id+off]
				if !ok || t.CPUs[m].Core >= 0 || placed[id+off] {
					members = []int{id}
					break
				}
				members = append(members, id+off)
			}
		}
		for _, m := range members {
			c := &t.CPUs[byID[m]]
			c.Core = next
			placed[m] = true
			c.Socket, c.BaseFreqKHz = nodeGuess(topo, c.NUMA)
			cores[next] = append(cores[next], m)
		}
		next++
	}
	for i := range t.CPUs {
		t.CPUs[i].Online = true
	}
	if inferred {
		renumberCores(t.CPUs, cores)
	}
	return &t
}

// threadPattern is the distance of each thread of a core from its first,
// when every core with the most threads shows the same; nil otherwise.
func threadPattern(cores map[int][]int) []int {
	most := 0
	for _, cpus := range cores {
		most = max(most, len(cpus))
	}
	if most < 2 {
		return nil
	}
	var pattern []int
	for _, cpus := range cores {
		if len(cpus) != most {
			continue
		}
		ids := slices.Sorted(slices.Values(cpus))
		offs := make([]int, len(ids))
		for i, id := range ids {
			offs[i] = id - ids[0]
		}
		if pattern == nil {
			pattern = offs
		} else if !slices.Equal(pattern, offs) {
			return nil
		}
	}
	return pattern
}

// coreOf is the known core an offline CPU belongs to by the pattern: the
// core whose CPUs all sit where the pattern puts the CPU's siblings.
func coreOf(pattern []int, id int, cores map[int][]int, byID map[int]int, cpus []sysfs.CPU) (int, bool) {
	if len(pattern) < 2 {
		return 0, false
	}
	for _, mine := range pattern {
		base := id - mine
		core, known := -1, 0
		ok := true
		for _, off := range pattern {
			i, present := byID[base+off]
			if !present || base+off == id {
				continue
			}
			c := cpus[i].Core
			if c < 0 {
				continue
			}
			if core >= 0 && c != core {
				ok = false
				break
			}
			core = c
			known++
		}
		if !ok || known == 0 {
			continue
		}
		// The core must have no CPU the pattern does not put there.
		fits := true
		for _, cpu := range cores[core] {
			if !slices.Contains(pattern, cpu-base) {
				fits = false
				break
			}
		}
		if fits {
			return core, true
		}
	}
	return 0, false
}

// joinCore gives an offline CPU the place of a sibling.
func joinCore(c *sysfs.CPU, from sysfs.CPU) {
	c.Core, c.CoreID, c.Socket, c.Die, c.Cluster = from.Core, from.CoreID, from.Socket, from.Die, from.Cluster
	c.L2, c.L3, c.BaseFreqKHz = from.L2, from.L3, from.BaseFreqKHz
	if c.NUMA == sysfs.Unknown {
		c.NUMA = from.NUMA
	}
}

// nodeGuess is the socket of a NUMA node's online CPUs (Unknown when they
// span several or there are none) and their lowest base frequency.
func nodeGuess(topo *sysfs.Topology, numa int) (socket int, baseFreqKHz int64) {
	socket = sysfs.Unknown
	first := true
	for _, c := range topo.CPUs {
		if !c.Online || c.NUMA != numa {
			continue
		}
		if first {
			socket, baseFreqKHz, first = c.Socket, c.BaseFreqKHz, false
			continue
		}
		if c.Socket != socket {
			socket = sysfs.Unknown
		}
		baseFreqKHz = min(baseFreqKHz, c.BaseFreqKHz)
	}
	return socket, baseFreqKHz
}

// renumberCores numbers the cores densely in order of their lowest CPU.
func renumberCores(cpus []sysfs.CPU, cores map[int][]int) {
	type core struct{ old, lowest int }
	var order []core
	for k, ids := range cores {
		order = append(order, core{k, slices.Min(ids)})
	}
	slices.SortFunc(order, func(a, b core) int { return a.lowest - b.lowest })
	index := map[int]int{}
	for i, c := range order {
		index[c.old] = i
	}
	for i := range cpus {
		if cpus[i].Core >= 0 {
			cpus[i].Core = index[cpus[i].Core]
		}
	}
}

// presentCores are the node's cores as the pools are carved
// (presentTopology places an offline CPU on its core, which the kernel no
// longer tells): of[cpu] is the CPU's core there (-1 unknown), threads
// the CPUs of each core, online or offline. Empty when every CPU is
// online, or SMT is off for good (an offline thread never comes online).
type presentCores struct {
	of      []int
	threads [][]int
}

func newPresentCores(topo *sysfs.Topology, x *index) presentCores {
	whole := presentTopology(topo)
	if whole == topo {
		return presentCores{}
	}
	pc := presentCores{of: make([]int, len(x.cpus))}
	for i := range pc.of {
		pc.of[i] = -1
	}
	for _, c := range whole.CPUs {
		if c.Core < 0 || c.ID >= len(pc.of) {
			continue
		}
		for len(pc.threads) <= c.Core {
			pc.threads = append(pc.threads, nil)
		}
		pc.of[c.ID] = c.Core
		pc.threads[c.Core] = append(pc.threads[c.Core], c.ID)
	}
	return pc
}
