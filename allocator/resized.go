package allocator

// The runtime's word over a lost in-place resize (see recover.go for the
// rounds of a restart): the runtime applies a resize when the plugin
// replies, and the state file learns of it only at the background write
// that follows, which a kill -9 (or a read-only or full disk, for hours)
// may never let happen. The container then runs on a set of another size
// than its record, with the request the resize asked for.

import (
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// ReadmitResized keeps a remembered exclusive container that Readmit found
// NeedsRepin where the runtime runs it, when that set is of another size
// than the record's and of the size of req.MilliCPU, the request the
// runtime shows for it now: an in-place resize whose record a kill lost.
// req is that resize's request as Resize would get it; the set must be of
// a shape a resize under its options makes (resizedShape). It is kept
// only where it may run (online CPUs of its pool as now configured
// that no other container or hold has, as restore checks), with milli as
// its request; nothing is added otherwise and the error says why. The
// CPUs it runs on beyond those the record had count as added by resizes
// (a shrink gives them back first); those the record named as added and
// it still runs on keep their order. If it no longer runs on its original
// set, which no resize gives back, the whole set counts as original.
//
// Synchronize calls it after Readmit has taken in every remembered
// container that runs where it may, so that a container whose record and
// runtime agree keeps a CPU both it and a resized one run on, and before
// any hold or any container the file does not know is taken in: the
// runtime is the truth about where a running container runs.
func (a *Allocator) ReadmitResized(r Remembered, req Request) (Result, error) {
	as := r.Assignment
	milli := req.MilliCPU
	// Its exclusive part, as Readmit reads it (its shared part on infra
	// left out too).
	runsOn := a.ExclusivePart(r)
	n := CPUsFor(milli)
	if absent := a.Absent(runsOn); !absent.IsEmpty() {
		// Nothing may index past the node (returnOrder, hiddenSiblings).
		return Result{}, fmt.Errorf("container %s: it runs on CPUs %s this node does not have", as.ID, absent)
	}
	switch {
	case !pools.IsExclusive(as.Pool):
		return Result{}, fmt.Errorf("container %s: pool %s has no CPUs of its own to keep", as.ID, as.Pool)
	case kubeletDecides(&as):
		// The kubelet's devices or the claim decide its CPUs, and no live
		// resize changes them (the plugin refuses one): another set is
		// not a resize's outcome, and its allocation is still its own.
		return Result{}, fmt.Errorf("container %s: its CPUs are those of its %s (%s), which no resize changes", as.ID, as.Rule.Kind, as.Rule.Detail)
	case r.Damaged:
		return Result{}, fmt.Errorf("container %s: its record is damaged", as.ID)
	case runsOn.IsEmpty():
		return Result{}, fmt.Errorf("container %s: the runtime does not pin it", as.ID)
	case runsOn.Size() == as.CPUs.Size():
		return Result{}, fmt.Errorf("container %s: it runs on CPUs %s, as many as its record's %s: not resized", as.ID, runsOn, as.CPUs)
	case runsOn.Size() != n:
		return Result{}, fmt.Errorf("container %s: it runs on %d CPUs (%s) but requests %dm (%d CPUs)", as.ID, runsOn.Size(), runsOn, milli, n)
	}
	hides := as.HideHyperthreads || !as.Reserved.IsEmpty() || req.Options.HideHyperthreads && a.x.threadsPerCore > 1
	if err := a.resizedShape(as, req, runsOn, hides); err != nil {
		return Result{}, err
	}
	resized := as
	resized.CPUs, resized.MilliCPU = runsOn, milli
	resized.Added = nil
	if original := as.Original(); original.IsSubsetOf(runsOn) {
		for _, id := range as.Added {
			if runsOn.Contains(id) {
				resized.Added = append(resized.Added, id)
			}
		}
		// The CPUs the lost grows added: in the order a grow records them,
		// after the ones the record has.
		before := as
		before.CPUs = original.Union(cpuset.New(resized.Added...))
		resized.Added = append(slices.Clone(resized.Added), a.returnOrder(&before, runsOn.Difference(as.CPUs))...)
	}
	if hides {
		// Hidden siblings follow its cores, as a resize's do.
		resized.Reserved, resized.HideHyperthreads = a.hiddenSiblings(runsOn), true
	}
	// Its memory, counted on the nodes it runs on now.
	resized.Memory = a.MemoryOf(resized, numamem.DemandOf(as.Memory))
	// Its offline CPUs stay its own, held offline, as Readmit keeps a
	// record's: a kept container is not pinned again, so no update names
	// them.
	return a.restoreHoldingOffline(resized)
}

// resizedShape refuses a set runsOn a remembered container as runs on
// that no live resize of it makes under req's options (as Resize reads
// them: its pod's annotations over its pool's configuration): a
// hide-hyperthreads one (hides) grows by cores, one thread each, the
// siblings idle; a full-pcpus-only one grows and shrinks by whole cores
// (wholeCores, and placement's whole-core unit), so the CPUs it gained or
// gave back are whole cores. hide-hyperthreads wins, as at placement.
func (a *Allocator) resizedShape(as Assignment, req Request, runsOn cpuset.CPUSet, hides bool) error {
	if hides {
		if core := a.sharedCore(runsOn); core != nil {
			return fmt.Errorf("container %s: it hides hyperthreads but runs on CPUs %s, threads of one core: no resize's outcome", as.ID, cpuset.New(core...))
		}
		return nil
	}
	verb := "grow"
	if runsOn.Size() < as.CPUs.Size() {
		verb = "shrink"
	}
	if err := a.wholeCores(&as, req, verb, runsOn.Size()); err != nil {
		return fmt.Errorf("container %s runs on CPUs %s, no resize's outcome: %w", as.ID, runsOn, err)
	}
	if !req.Options.FullPCPUsOnly || a.x.threadsPerCore <= 1 {
		return nil
	}
	changed := runsOn.Difference(as.CPUs).Union(as.CPUs.Difference(runsOn))
	if part := a.partCore(changed); part != nil {
		return fmt.Errorf("container %s runs on CPUs %s, its record says %s: full-pcpus-only resizes by whole cores, and CPU %d's core changed only in part: no resize's outcome", as.ID, runsOn, as.CPUs, part[0])
	}
	return nil
}

// restoreHoldingOffline is restore for a container kept where the runtime
// runs it, not pinned again: its offline CPUs are no conflict and stay its
// own (held offline), as keep has them; any other problem refuses it.
// readd's note (its shared part on infra while the shared pool is held) is
// the Result's Warning, never the error: the container was added, and an
// error tells the caller nothing was (it would pin it again on its record
// while its grown CPUs stayed owned by it).
func (a *Allocator) restoreHoldingOffline(as Assignment) (Result, error) {
	res, note, err := a.readdHoldingOffline(as)
	if err != nil {
		return Result{}, err
	}
	if note != nil {
		res.Warning = note.Error()
	}
	return res, nil
}

// sharedCore returns two online CPUs of cpus that are threads of one core,
// or nil.
func (a *Allocator) sharedCore(cpus cpuset.CPUSet) []int {
	for _, id := range cpus.List() {
		if !a.x.online(id) || a.x.cpus[id].core < 0 {
			continue
		}
		for _, t := range a.x.cores[a.x.cpus[id].core] {
			if t != id && cpus.Contains(t) {
				return []int{id, t}
			}
		}
	}
	return nil
}
