package allocator

import (
	"fmt"

	"k8s.io/utils/cpuset"
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
// the rest (dropOfflineElsewhere).

// offlineElsewhere are the offline CPUs (and hidden siblings) of as that
// the config in force carves into a pool other than as.Pool.
// A CPU the hypervisor hot-removed (put back at its remembered place,
// Topology.Absent) is not judged: the config fitted to the node without
// it cannot list it in a pool, and it comes back only by a hot-add, placed
// by the config then in force (as a reload leaves it, reload_offline.go).
func (a *Allocator) offlineElsewhere(as *Assignment) cpuset.CPUSet {
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
func (a *Allocator) dropOfflineElsewhere(h Hold) (_ Hold, warning string, err error) {
	key := h.restartKey()
	elsewhere := a.offlineElsewhere(&h.Assignment)
	if elsewhere.IsEmpty() {
		return h, "", nil
	}
	if h.CPUs.Difference(elsewhere).IsEmpty() {
		return h, "", fmt.Errorf("%w; none of its CPUs is left to hold", offlineElsewhereError("hold "+key, elsewhere, h.Pool))
	}
	h.CPUs, h.Reserved = h.CPUs.Difference(elsewhere), h.Reserved.Difference(elsewhere)
	// The hold's memory nodes follow what it keeps, as when a pod's
	// other container takes some of its CPUs (takeFromHolds).
	h.Mems = a.memsOf(&h.Assignment)
	return h, fmt.Sprintf("%v; they leave the hold, which keeps CPUs %s", offlineElsewhereError("hold "+key, elsewhere, h.Pool), h.Held()), nil
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
	elsewhere := a.offlineElsewhere(&as)
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
