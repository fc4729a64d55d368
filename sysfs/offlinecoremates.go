package sysfs

// The core a present offline CPU joins when it comes online. The kernel
// removes an offline CPU's topology directory and takes it out of its
// siblings' lists, so with every core's second thread offline (per-CPU
// hotplug with SMT on, the pre-4.19 way of turning SMT off, or a boot with
// maxcpus=) no online core shows two threads and nothing the kernel shows
// tells where an offline thread sits. The record of the CPUs seen online
// (Remember) does, when it was made while the thread was online. It is
// used for one thing: a hide-hyperthreads container keeps such a sibling
// idle once it comes online. The carving, threads per core and the
// full-pcpus-only unit stay on the online CPUs, as the kubelet counts them.

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// offlineCoreMates are, by CPU id, the online threads of the core that
// each present offline CPU of unknown core joins by rec. An entry is used
// only where it agrees with what the kernel shows: its siblings list the
// CPU itself and exactly the online threads of one core, its socket and
// core id are that core's, and the kernel's NUMA node of the CPU (node
// cpulists keep offline CPUs) is that core's; and a core takes no more
// offline CPUs than its widest remembered siblings list has room for. A
// stale record (another BIOS numbering, a copied image) thus joins no
// core across NUMA nodes or sockets, and a 4-way core keeps its 4
// threads. None while SMT is disabled: the kernel keeps those threads
// offline for good.
func (t *Topology) offlineCoreMates(rec Remembered) map[int]cpuset.CPUSet {
	if t.Offline.IsEmpty() || t.SMTDisabled() || len(rec.CPUs) == 0 {
		return nil
	}
	byID := make(map[int]CPU, len(t.CPUs))
	online := map[int]cpuset.CPUSet{} // the kernel's core → its online threads
	for _, c := range t.CPUs {
		byID[c.ID] = c
		if c.Online && c.Core != Unknown {
			online[c.Core] = online[c.Core].Union(cpuset.New(c.ID))
		}
	}
	joins := map[int][]int{} // core → offline CPUs joining it
	widest := map[int]int{}  // core → its widest remembered siblings list
	seen := map[int]bool{}
	for _, r := range rec.CPUs {
		if r.ID < 0 || seen[r.ID] { // as remembered reads the record
			continue
		}
		seen[r.ID] = true
		c, ok := byID[r.ID]
		if !ok || c.Online || c.Core != Unknown || t.Absent.Contains(r.ID) {
			continue
		}
		listed, err := cpulist.Parse(r.Siblings)
		if err != nil || !listed.Contains(r.ID) {
			continue
		}
		on := listed.Intersection(t.Online)
		if on.IsEmpty() {
			continue
		}
		mate := byID[on.List()[0]]
		switch {
		case mate.Core == Unknown || !online[mate.Core].Equals(on),
			r.Socket != mate.Socket || r.CoreID != mate.CoreID,
			c.NUMA != Unknown && c.NUMA != mate.NUMA:
			continue
		}
		joins[mate.Core] = append(joins[mate.Core], r.ID)
		widest[mate.Core] = max(widest[mate.Core], listed.Size())
	}
	var mates map[int]cpuset.CPUSet
	for core, ids := range joins {
		if online[core].Size()+len(ids) > widest[core] {
			continue // more threads than any entry remembers: stale
		}
		if mates == nil {
			mates = map[int]cpuset.CPUSet{}
		}
		for _, id := range ids {
			mates[id] = online[core]
		}
	}
	return mates
}
