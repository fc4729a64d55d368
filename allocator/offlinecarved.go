package allocator

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
)

// The rule for an offline CPU that a remembered exclusive assignment names
// at a restart, a running container's record (prepareReadd: Readmit,
// ReadmitResized, Repin) or a stopped container's hold (RestoreHold): it
// is in no pool's online CPUs, so it is checked on the carving on the
// present CPUs. One the config in force carves into another pool (a config
// changed while the plugin was down) is not the assignment's: held for it,
// it would be its own once it comes online, and the plugin itself would
// put the other pool's load beside it, or it beside that load. One the
// carving does not cover (smt/control off carves on the online CPUs alone)
// stays its own, as nothing says it is another pool's. Each path decides
// what follows: a container's record is not pinned back (it is placed
// anew, dropOfflineSiblingsElsewhere), a hold lets the CPU go and keeps
// the rest (dropOfflineElsewhere), but for a hold whose CPUs the kubelet
// chose, which keeps it and says so. A carving in failing mode says no
// offline CPU is another pool's.

// offlineElsewhere are the offline CPUs (and hidden siblings) of as that
// the config in force carves into a pool other than as.Pool. None is
// while the running layout carves in failing mode (HotplugLayout: the
// config does not fit the present CPUs): that carving sends every offline
// CPU to infra only because the counts cannot be laid out, not because
// the config gives it another pool, so nothing says it is not as's.
// A CPU the hypervisor hot-removed (put back at its remembered place,
// Topology.Absent) is not judged: the config fitted to the node without
// it cannot list it in a pool, and it comes back only by a hot-add, placed
// by the config then in force (as a reload leaves it, reload_offline.go).
func (a *Allocator) offlineElsewhere(as *Assignment) cpuset.CPUSet {
	if a.layout.carved.whileFailing {
		return cpuset.New()
	}
	return a.layout.carvedElsewhere(as.Pool, a.offline(as).Difference(a.x.topo.Absent))
}

// offlineElsewhereError says that the offline CPUs elsewhere of who's
// pool are another pool's. The words are those the restart's log and
// docs/configuration.md show.
func offlineElsewhereError(who string, elsewhere cpuset.CPUSet, pool string) error {
	return fmt.Errorf("%s: offline CPUs %s are another pool's as now configured, not pool %s's", who, elsewhere, pool)
}

// dropOfflineElsewhere takes a remembered hold's offline CPUs that the
// config in force carves into another pool out of it, its CPUs and hidden
// siblings alike: the stopped container's next run must not start on
// them. warning says which CPUs went and what the hold keeps; err, that
// none of its CPUs is left, and nothing is to be held.
//
// A hold whose CPUs the kubelet decides (kubeletDecides) keeps them: the
// kubelet restarts the container with the CPUs its checkpoint names for
// the pod's life, and placeExact accepts an offline one only as the pod's
// own hold's; let go, the restart would be refused at every retry while
// the pod lives. warning then says the conflict and how to end it.
func (a *Allocator) dropOfflineElsewhere(h Hold) (_ Hold, warning string, err error) {
	key := h.restartKey()
	elsewhere := a.offlineElsewhere(&h.Assignment)
	if elsewhere.IsEmpty() {
		return h, "", nil
	}
	if kubeletDecides(&h.Assignment) {
		return h, a.keptForTheKubelet("hold "+key, &h.Assignment, elsewhere), nil
	}
	if h.CPUs.Difference(elsewhere).IsEmpty() {
		return h, "", fmt.Errorf("%w; none of its CPUs is left to hold", offlineElsewhereError("hold "+key, elsewhere, h.Pool))
	}
	h.CPUs, h.Reserved = h.CPUs.Difference(elsewhere), h.Reserved.Difference(elsewhere)
	// The idle siblings of a CPU that left are not the hold's either.
	h.Reserved = a.keptSiblings(&h.Assignment)
	// The hold's memory nodes follow what it keeps, as when a pod's
	// other container takes some of its CPUs (takeFromHolds).
	h.Mems = a.memsOf(&h.Assignment)
	return h, fmt.Sprintf("%v; they leave the hold, which keeps CPUs %s", offlineElsewhereError("hold "+key, elsewhere, h.Pool), h.Held()), nil
}

// keptForTheKubelet says that offline CPUs elsewhere of as, whose CPUs the
// kubelet decides, stay its own: which pool the config in force gives
// each, what happens once they are online, and how to end the conflict.
func (a *Allocator) keptForTheKubelet(who string, as *Assignment, elsewhere cpuset.CPUSet) string {
	byPool := map[string][]int{}
	for _, cpu := range elsewhere.List() {
		p := a.layout.carvedInto(cpu)
		byPool[p] = append(byPool[p], cpu)
	}
	var whose, others []string
	for _, p := range slices.Sorted(maps.Keys(byPool)) {
		cpus := cpuset.New(byPool[p]...)
		whose = append(whose, fmt.Sprintf("%s %s pool %s's", plural.CPUs(cpus), plural.Verb(cpus.Size(), "is", "are"), p))
		others = append(others, "pool "+p)
	}
	n := elsewhere.Size()
	it, stays := plural.Verb(n, "it", "them"), plural.Verb(n, "stays", "stay")
	return fmt.Sprintf("%s: offline %s as now configured, not pool %s's, but the pod's allocation (%s: %s) "+
		"names %s, and the kubelet restarts the container with %s while the pod lives: %s held (without %s the restart "+
		"would be refused); once online %s the pod's, and %s runs without %s until the pod ends; to end this, delete "+
		"the pod (its replacement gets CPUs of pool %s) or give %s back to pool %s in the config",
		who, strings.Join(whose, ", "), as.Pool, as.Rule.Kind, as.Rule.Detail,
		it, it, it+" "+stays, it, it+" "+stays, strings.Join(others, " and "), it, as.Pool, plural.CPUs(elsewhere), as.Pool)
}

// carvedInto names the pool the config in force carves an offline cpu
// into (carvedElsewhere's sets); an exclusive-non-isolcpus CPU is lent
// out of infra, and said as infra's.
func (l *Layout) carvedInto(cpu int) string {
	switch {
	case l.SharedCarved.Contains(cpu):
		return pools.Shared
	case l.carved.exclusive.Contains(cpu):
		return pools.Exclusive
	}
	return pools.Infra
}

// dropOfflineSiblingsElsewhere takes a remembered running container's
// offline hidden siblings that the config in force carves into another
// pool out of its record, at a restart (Readmit, Repin): once online they
// run that pool's load, not idle beside it, as a hold lets them go. Its
// size is its CPUs, which this leaves as they are, so it is kept or pinned
// back as before; warning names the siblings that went and what the record
// keeps. Its offline CPUs (not siblings) elsewhere stay in the record, for
// the restart to refuse it (Readmit: NeedsRepin; prepareReadd's problem):
// without them it is no longer the container's size, and it is placed anew
// by its request, as Repin places an exact-request container whose record
// it cannot have. Kept on the rest, it would run on fewer CPUs than the
// kubelet gave it, its request read as their count.
func (a *Allocator) dropOfflineSiblingsElsewhere(as Assignment) (_ Assignment, warning string) {
	elsewhere, _ := a.recordOfflineElsewhere(&as)
	if elsewhere.IsEmpty() || !elsewhere.IsSubsetOf(as.Reserved) {
		return as, ""
	}
	as.Reserved = as.Reserved.Difference(elsewhere)
	return as, fmt.Sprintf("%v; they leave its record, which keeps CPUs %s", offlineElsewhereError("container "+ShortID(as.ID), elsewhere, as.Pool), as.Held())
}

// withWarning is res with warning said too.
func withWarning(res Result, warning string) Result {
	switch {
	case warning == "":
	case res.Warning == "":
		res.Warning = warning
	default:
		res.Warning += "; " + warning
	}
	return res
}

// recordOfflineElsewhere is offlineElsewhere for a running container's
// record at a restart (Readmit, prepareReadd, dropOfflineSiblingsElsewhere).
// A record whose CPUs the kubelet decides (kubeletDecides) keeps them, as
// its stopped container's hold does (dropOfflineElsewhere): the pod's
// allocation names them for its life, and placed anew by that allocation
// the container would be refused for the offline CPU and confined to
// infra. Then elsewhere is empty and kept says why the record keeps them.
func (a *Allocator) recordOfflineElsewhere(as *Assignment) (elsewhere cpuset.CPUSet, kept string) {
	elsewhere = a.offlineElsewhere(as)
	if !elsewhere.IsEmpty() && kubeletDecides(as) {
		return cpuset.New(), a.keptForTheKubelet("container "+ShortID(as.ID), as, elsewhere)
	}
	return elsewhere, ""
}
