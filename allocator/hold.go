package allocator

import (
	"maps"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// Stop ends a container's run. An exclusive container of a known pod keeps
// its CPUs as a hold for the pod; anything else is released.
func (a *Allocator) Stop(id string, exitCode *int32) Result {
	c, ok := a.containers[id]
	if !ok {
		return Result{}
	}
	if !pools.IsExclusive(c.Pool) || c.Pod.UID == "" {
		return a.Release(id)
	}
	a.removeContainer(id)
	key := c.restartKey()
	if old, ok := a.holds[key]; ok && old.ID != id {
		// Two runs of one container stopped without a create in between
		// (only a runtime that skips events does that): the newer wins.
		a.dropHold(key, old)
	}
	a.holds[key] = &Hold{Assignment: *c, ExitCode: exitCode}
	// The CPUs stay owned, now by the hold; infra does not change.
	return Result{Assignment: *c}
}

// ReleasePod ends every hold and every remaining assignment of a pod whose
// sandbox stopped or was removed: none of its containers can run again.
// Released lists the assignments of containers that were still running.
func (a *Allocator) ReleasePod(uid string) (released []Assignment, res Result) {
	if uid == "" {
		return nil, Result{}
	}
	infraBefore := a.markInfra()
	for _, key := range a.podHoldKeys(uid) {
		a.dropHold(key, a.holds[key])
	}
	// The pod's own containers, not every container on the node.
	for _, id := range slices.Sorted(maps.Keys(a.byPod[uid])) {
		c := a.containers[id]
		released = append(released, *c)
		a.free(c)
		a.removeContainer(id)
	}
	res.Updates, res.InfraChanged = a.followInfra(infraBefore)
	return released, res
}

// Holds returns every hold, sorted by pod UID and container name.
func (a *Allocator) Holds() []Hold {
	out := make([]Hold, 0, len(a.holds))
	for _, key := range a.sortedHoldKeys() {
		out = append(out, *a.holds[key])
	}
	return out
}

// HoldsOf returns the holds of one pod, sorted by container name.
func (a *Allocator) HoldsOf(uid string) []Hold {
	var out []Hold
	for _, key := range a.podHoldKeys(uid) {
		out = append(out, *a.holds[key])
	}
	return out
}

// reusableFor returns the CPUs a new run of container req may take from
// its pod's holds: its own hold's (a new run ends it anyway) and the
// reusable holds of the pod's other containers, in the requested pool.
func (a *Allocator) reusableFor(req Request) cpuset.CPUSet {
	if req.Pod.UID == "" {
		return cpuset.New()
	}
	var cpus []int
	for _, h := range a.holds {
		if h.Pod.UID != req.Pod.UID || h.Pool != req.Pool {
			continue
		}
		if h.Container == req.Container || h.Reusable() {
			cpus = append(cpus, h.Held().UnsortedList()...)
		}
	}
	return cpuset.New(cpus...)
}

// takeFromHolds settles the holds of a new container's pod before it is
// committed: its own hold ends (what the new run does not reuse is freed),
// and CPUs it reuses leave the other containers' holds. memory is what the
// new container holds of the nodes' memory. It returns the stopped
// container whose held CPUs it took, for its Rule ("" for none).
func (a *Allocator) takeFromHolds(req Request, taken cpuset.CPUSet, memory []numamem.NodeMemory) (from string) {
	if req.Pod.UID == "" {
		return ""
	}
	own := req.Pod.UID + "/" + req.Container
	for _, key := range a.podHoldKeys(req.Pod.UID) {
		h := a.holds[key]
		if key == own {
			if !h.Held().Intersection(taken).IsEmpty() {
				from = h.Container
			}
			a.dropHold(key, h)
			continue
		}
		reused := h.Held().Intersection(taken)
		if len(h.Memory) > 0 && h.Reusable() && a.countsMemory(req) &&
			(!reused.IsEmpty() || numamem.NodeSet(h.Memory).Intersection(numamem.NodeSet(memory)).Size() > 0) {
			// A completed container's memory goes to the pod's next
			// container that counts memory and takes its CPUs, or takes
			// memory of its nodes, which the decision counted as its own
			// (see lentMemory): anything else of the pod (a sidecar, a
			// container asking for no memory, one placed elsewhere)
			// leaves the hold its memory.
			h.Memory = nil
			a.mem.Set(h.ID, nil)
		}
		if reused.IsEmpty() {
			continue
		}
		if from == "" {
			from = h.Container
		}
		// Not disown: the container taking these CPUs owns them next
		// (commit, or a grow), which it would not if they went to another
		// holder in between; they are free only until then.
		for _, cpu := range reused.UnsortedList() {
			if a.owner[cpu] == h.ID {
				a.setOwner(cpu, "")
			}
		}
		h.CPUs, h.Reserved = h.CPUs.Difference(reused), h.Reserved.Difference(reused)
		if h.CPUs.IsEmpty() {
			a.dropHold(key, h)
			continue
		}
		// The idle siblings of the CPUs it took are no hold's to keep.
		kept := a.keptSiblings(&h.Assignment)
		a.disown(h.ID, h.Reserved.Difference(kept))
		h.Reserved = kept
		h.Mems = a.memsOf(&h.Assignment)
	}
	return from
}

// keptSiblings are the CPUs of as.Reserved that are hidden siblings of
// its CPUs (threads of their cores, online or offline): once some of a
// hold's CPUs leave it (a pod's other container takes them, a restart
// lets an offline one go), their idle siblings would stay held for a
// core it no longer has, exclusive CPUs no one may be given while the pod
// lives. A reserved CPU whose core is not known is kept: nothing says
// it is not one of theirs.
func (a *Allocator) keptSiblings(as *Assignment) cpuset.CPUSet {
	if as.Reserved.IsEmpty() {
		return as.Reserved
	}
	cores := map[int]bool{}
	for _, id := range as.CPUs.UnsortedList() {
		if core := a.coreOf(id); core >= 0 {
			cores[core] = true
		}
	}
	var out []int
	for _, id := range as.Reserved.UnsortedList() {
		if core := a.coreOf(id); core < 0 || cores[core] {
			out = append(out, id)
		}
	}
	return cpuset.New(out...)
}

// coreOf is cpu's core, also while it is offline (the carving's cores,
// presentCores, place it there); -1 when not known.
func (a *Allocator) coreOf(cpu int) int {
	if cpu < 0 || cpu >= len(a.x.cpus) {
		return -1
	}
	if len(a.cores.of) > 0 {
		return a.cores.of[cpu]
	}
	if !a.x.online(cpu) {
		return -1
	}
	return a.x.cpus[cpu].core
}

// dropHold ends a hold and frees its CPUs.
func (a *Allocator) dropHold(key string, h *Hold) {
	delete(a.holds, key)
	a.free(&h.Assignment)
}

// lend makes CPUs look free to the planner for one decision and, with
// only, every other CPU look taken; the returned function undoes it.
func (a *Allocator) lend(cpus cpuset.CPUSet, only bool, pool cpuset.CPUSet) (undo func()) {
	saved := map[int]string{}
	for _, cpu := range cpus.UnsortedList() {
		saved[cpu] = a.owner[cpu]
		a.setOwner(cpu, "")
	}
	if only {
		for _, cpu := range pool.UnsortedList() {
			if _, lent := saved[cpu]; !lent && a.owner[cpu] == "" {
				saved[cpu] = ""
				a.setOwner(cpu, lentAway)
			}
		}
	}
	return func() {
		for cpu, o := range saved {
			a.setOwner(cpu, o)
		}
	}
}

// lentAway marks free CPUs hidden from a decision that must reuse held ones.
const lentAway = "\x00"

// HeldCPUs returns the CPUs (and reserved siblings) held by the exclusive
// containers and holds of the pools for which keep returns true. The
// plugin's background passes (housekeeping, kernel work) call it under the
// plugin's lock: it walks the exclusive containers only, neither sorting
// nor copying them.
func (a *Allocator) HeldCPUs(keep func(pool string) bool) cpuset.CPUSet {
	var ids []int
	for _, c := range a.exclusive {
		if keep(c.Pool) {
			ids = append(ids, c.Held().UnsortedList()...)
		}
	}
	for _, h := range a.holds {
		if pools.IsExclusive(h.Pool) && keep(h.Pool) {
			ids = append(ids, h.Held().UnsortedList()...)
		}
	}
	return cpuset.New(ids...)
}

// IRQIsolated returns the CPUs device IRQs are kept off: every CPU (and
// reserved sibling) of an exclusive container or hold that asked for it.
// The plugin's background IRQ pass calls it, under the plugin's lock: it
// walks the exclusive containers only, without sorting.
func (a *Allocator) IRQIsolated() cpuset.CPUSet {
	var ids []int
	for _, c := range a.exclusive {
		if c.IsolateIRQs {
			ids = append(ids, c.Held().UnsortedList()...)
		}
	}
	for _, h := range a.holds {
		if h.IsolateIRQs && pools.IsExclusive(h.Pool) {
			ids = append(ids, h.Held().UnsortedList()...)
		}
	}
	return cpuset.New(ids...)
}
