package allocator

// The recovery rules: what becomes of the containers and holds a restart
// of the plugin finds, given what the state file remembers and where the
// runtime runs them. The runtime is the truth about where a container
// runs; the file is a memory, checked against the node and the
// configuration before anything is taken from it.
//
// Synchronize takes the containers back in three rounds, so that a
// container that runs where it may is never displaced by one that does
// not:
//
//  1. Readmit each remembered container the runtime runs: Kept,
//     KeptWhereItRuns, or NeedsRepin; then ReadmitResized each that
//     NeedsRepin and runs where an in-place resize the file lost put it
//     (resized.go).
//  2. RestoreHold the holds of stopped containers whose pods still exist,
//     and AdoptWhereItRuns the containers the file does not know that run
//     pinned where they may stay (adoptwhere.go).
//  3. Repin each container of round 1 that NeedsRepin: Repinned, or
//     NeedsPlacement (the caller places it as new, with Adopt's rules, or
//     confines it).
//
// The other containers the file does not know are adopted (Adopt):
// StaysWhereItRuns or PlacedAsNew.

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// Remembered is a container the state file remembers and the runtime runs.
type Remembered struct {
	// Assignment is the record, with CPUs this node lacks dropped.
	Assignment Assignment
	// Damaged tells that the record was malformed or named CPUs this node
	// lacks: what is left of it cannot say where the container belongs.
	Damaged bool
	// RunsOn is the runtime's cpuset for the container; empty when it may
	// run on every CPU (no cpuset, a malformed one, or one naming CPUs
	// this node lacks). Shared and infra members need none.
	RunsOn cpuset.CPUSet
}

// Readmitted is what became of a remembered container at a restart.
type Readmitted int

const (
	// Kept: it keeps its remembered CPUs, where it runs; a shared or infra
	// member keeps its pool, wherever it runs. A conflict with the
	// configuration (the pool changed) does not move it: the error says
	// what it is.
	Kept Readmitted = iota + 1
	// KeptWhereItRuns: it runs on another set of its exclusive pool, of
	// the size it remembered, that no other container holds, and keeps it.
	KeptWhereItRuns
	// NeedsRepin: it does not run where it may. Nothing was added: Repin
	// it once every container that does, and every hold, has its CPUs.
	NeedsRepin
	// Repinned: its remembered CPUs were free; it has them again, and the
	// runtime must be told to pin it there.
	Repinned
	// NeedsPlacement: its remembered CPUs cannot be had; nothing was added.
	NeedsPlacement
)

func (r Readmitted) String() string {
	switch r {
	case Kept:
		return "kept"
	case KeptWhereItRuns:
		return "kept where it runs"
	case NeedsRepin:
		return "needs repin"
	case Repinned:
		return "repinned"
	case NeedsPlacement:
		return "needs placement"
	}
	return fmt.Sprintf("Readmitted(%d)", int(r))
}

// Readmit is round 1 of a restart for a remembered container the runtime
// runs: it keeps the container where the runtime runs it if that is a place
// it may run, its remembered CPUs or another whole set of its pool that
// nobody else holds. Two containers on one exclusive CPU: the first one
// readmitted keeps it, and the other NeedsRepin. A Kept container's error
// reports a conflict it was kept despite; but a record's offline CPU that
// the config in force gives another pool is none it is kept with
// (offlinecarved.go): with such a CPU it NeedsRepin, and Repin refuses it;
// such a hidden sibling leaves the record, the Result's Warning saying so.
//
// It runs before any hold is restored, and must: it reads every owner of
// the record's CPUs but the container itself as another's, the hold of its
// own last run (same pod and container) included, where a re-add
// (prepareReadd) ends that hold and takes its CPUs as the container's own.
// With such a hold present, a container on its record NeedsRepin and Repin
// pins it back there (no move, one needless update), but one kept where
// it runs on another free set of its size NeedsRepin too and Repin moves
// it back onto the record. Its callers keep the order: Synchronize
// readmits into an empty allocator and restores holds after (RestoreHold
// refuses the hold of a container that runs again), and Relayout readmits
// into an empty trial allocator before its holds
// (readmit_own_hold_test.go shows what another order would do).
func (a *Allocator) Readmit(r Remembered) (Result, Readmitted, error) {
	as := r.Assignment
	if !pools.IsExclusive(as.Pool) {
		// Shared and infra members follow their pool; the caller updates
		// them if they run elsewhere.
		res, err := a.keep(as)
		return res, Kept, err
	}
	as, warning := a.dropOfflineSiblingsElsewhere(as)
	// kept says the record keeps offline CPUs the kubelet chose that the
	// config gives another pool: true only where the record is kept as it
	// is (keep, or Repin after NeedsRepin), not where it runs elsewhere.
	elsewhere, kept := a.recordOfflineElsewhere(&as)
	r.Assignment = as
	runsOn := a.ExclusivePart(r)
	switch {
	case r.Damaged || runsOn.IsEmpty():
		return Result{}, NeedsRepin, nil
	case !a.heldByOthers(as.Held(), as.ID).IsEmpty():
		return Result{}, NeedsRepin, nil
	case !elsewhere.IsEmpty() && as.Held().Difference(a.offline(&as)).IsSubsetOf(a.keepable(as.Pool)):
		// Offline CPUs of its record the config in force gives another
		// pool (offlinecarved.go): kept, they were its own and that
		// pool's once online. Without them it is not its size: Repin
		// refuses it, and it is placed anew by its request. One that
		// runs on online CPUs the config gives another pool too is kept
		// whole where it runs, as any container after a config change
		// (keep: the conflict is reported, and the pool's members stay
		// off what it holds).
		return Result{}, NeedsRepin, nil
	case cpulist.Equal(runsOn, as.CPUs), a.sameWhileOffline(runsOn, as.CPUs):
		res, err := a.keep(as)
		return withWarning(withWarning(res, warning), kept), Kept, err
	case runsOn.Size() == as.CPUs.Size():
		moved := as
		moved.CPUs = runsOn
		if as.HideHyperthreads || !as.Reserved.IsEmpty() {
			moved.Reserved = a.hiddenSiblings(runsOn)
		}
		if res, note, err := a.restoreNoted(moved); err == nil {
			return withWarning(res, warning), KeptWhereItRuns, note
		}
	}
	return Result{}, NeedsRepin, nil
}

// ExclusivePart is what a remembered exclusive container runs on as its
// exclusive part: all the runtime runs it on, unless it asked for the
// shared pool too. Readmit, ReadmitResized and the restart's reading of a
// lost resize all read it here, so that a running container is judged the
// same way by each (one that counted its shared part on infra as exclusive
// CPUs took a lost grow for a set of the wrong size and pinned it again).
func (a *Allocator) ExclusivePart(r Remembered) cpuset.CPUSet {
	as := r.Assignment
	if !as.WithShared {
		return r.RunsOn
	}
	// Its exclusive part is what it runs on beside the shared pool (as it
	// is now, or as the record knew it); readd gives it the pool as it is
	// now. The record says which CPUs are its exclusive part: a config
	// change that hands them to the shared pool must not take them from
	// it, or it would be placed again and its poll CPUs would join the
	// shared pool. The exclusive part never moves.
	runsOn := r.RunsOn.Difference(a.PoolCPUs(pools.Shared).Union(as.Shared).Difference(as.CPUs))
	// Beside its exclusive part it may run on infra: its shared part, put
	// there (readd) while no shared CPU was free, which a record written
	// before that (kill -9 before the state write) does not know. That is
	// no move: what is left is its exclusive part, kept where it runs if
	// free and of its size, as any other.
	if own := runsOn.Intersection(as.CPUs).Union(runsOn.Difference(a.sharedPartBeside(as.Pool, as.CPUs))); !own.IsEmpty() {
		runsOn = own
	}
	return runsOn
}

// sharedPartBeside are the CPUs of sharedPartElsewhere that a with-shared
// container of pool, whose exclusive part is (or was) own, may run its
// shared part on beside it. An exclusive-non-isolcpus container's
// exclusive CPUs are lent from infra too, and a lost grow adds more of
// them: they count as its shared part only while no shared CPU is free but
// its own (the shared part runs on infra only then), else as its
// exclusive part. The exclusive pool shares no CPU with infra, so for it
// infra is its shared part's whenever it runs there, even once the
// shared pool is free again (the container that held it ended while the
// plugin was down). While the pool is held an exclusive-non-isolcpus
// container's lost grow cannot be told from its shared part: it is kept
// on its record, and resizeAsTheRuntime grows it again.
func (a *Allocator) sharedPartBeside(pool string, own cpuset.CPUSet) cpuset.CPUSet {
	elsewhere := a.sharedPartElsewhere()
	if !a.PoolCPUs(pools.Shared).Difference(own).IsEmpty() {
		elsewhere = elsewhere.Difference(a.layout.Pool(pool))
	}
	return elsewhere
}

// sharedPartElsewhere are the CPUs a with-shared container's shared part
// runs on, beside its exclusive part, when the shared pool has no free CPU:
// where MembersCPUs puts shared users now, and the infra pool, where it
// put them while a kept container (maybe the one being readmitted, not yet
// re-added) held the whole shared pool.
func (a *Allocator) sharedPartElsewhere() cpuset.CPUSet {
	return a.PoolCPUs(pools.Infra).Union(a.MembersCPUs(pools.Shared))
}

// sameWhileOffline tells whether a container runs on its remembered CPUs
// but for some the kernel took offline: cgroup v1 drops an offline CPU
// from the cpuset for good, and a runtime that reads it back reports the
// rest. The record keeps them (held offline, see Rebase).
func (a *Allocator) sameWhileOffline(runsOn, remembered cpuset.CPUSet) bool {
	off := remembered.Difference(runsOn)
	if off.IsEmpty() || !runsOn.IsSubsetOf(remembered) {
		return false
	}
	for _, cpu := range off.UnsortedList() {
		if a.x.online(cpu) || !a.x.present(cpu) {
			return false
		}
	}
	return true
}

// Repin is round 3 for a container Readmit found NeedsRepin: back on its
// remembered CPUs when the record is whole and they are free (Repinned,
// and an error is a note: why it runs off its pool's CPUs), else
// NeedsPlacement, and the error says why. Its CPUs that are offline stay
// its own, held offline (restoreHoldingOffline's rule): cgroup v1 dropped
// them from its cpuset, which is no reason to move it off the others, and
// the update that pins it names only its online CPUs (the plugin's
// runnable). Only a record with no CPU online is refused: there is nothing
// to pin it on; and one with an offline CPU the config in force gives
// another pool (offlinecarved.go: its offline hidden siblings there leave
// the record, the Result's Warning saying so).
func (a *Allocator) Repin(r Remembered) (Result, Readmitted, error) {
	as, warning := a.dropOfflineSiblingsElsewhere(r.Assignment)
	if r.Damaged {
		return Result{}, NeedsPlacement, fmt.Errorf("container %s: the remembered CPUs are damaged", as.ID)
	}
	// Every CPU it runs on offline: nothing to pin it on. Its hidden
	// siblings (Held's Reserved) are no CPUs it runs on.
	if off := a.offline(&as); !off.IsEmpty() && as.CPUs.Difference(off).IsEmpty() {
		return Result{}, NeedsPlacement, fmt.Errorf("container %s: CPUs %s are offline, every one it runs on", as.ID, as.CPUs)
	}
	_, kept := a.recordOfflineElsewhere(&as)
	res, note, err := a.readdHoldingOffline(as)
	if err != nil {
		return Result{}, NeedsPlacement, err
	}
	return withWarning(withWarning(res, warning), kept), Repinned, note
}

// GivenAway tells whether the CPUs of a remembered exclusive container's
// record that it no longer runs on (runsOn, its exclusive part) read as
// CPUs a live shrink gave back and the plugin placed since, the one reason
// a record that cannot be pinned back says the container shrank: none of
// them is offline or gone from the node (cgroup v1 drops an offline CPU
// from the cpuset for good, which looks like a shrink but is none; Repin
// holds such CPUs for it), and another container or a hold has at least
// one (a CPU no one has was not given away). Any other reason Repin
// fails (a configuration that no longer has the CPUs in the pool, a
// damaged record) says nothing of a shrink.
func (a *Allocator) GivenAway(as Assignment, runsOn cpuset.CPUSet) bool {
	gone := as.CPUs.Difference(runsOn)
	if gone.IsEmpty() || !a.Absent(gone).IsEmpty() {
		return false
	}
	for _, cpu := range gone.UnsortedList() {
		if !a.x.online(cpu) {
			return false
		}
	}
	return !a.heldByOthers(gone, as.ID).IsEmpty()
}

// restore re-adds a container exactly where it runs, and only if it may run
// there: on online CPUs of its pool as now configured that no other
// container holds. It never moves the container; the error says what is
// wrong, and nothing is added. It is for a container that must be pinned
// (again): an update naming an offline CPU fails on cgroup v1, so a set
// with one is refused.
func (a *Allocator) restore(as Assignment) (Result, error) {
	res, _, _, err := a.restoreEnding(as)
	return res, err
}

// restoreNoted is restore, and note, with no error, says why it was added
// off its pool's CPUs (readd: a shared part on infra while the shared pool
// is fully held). The note is never the error, which callers read as
// "nothing was added": the container was added.
func (a *Allocator) restoreNoted(as Assignment) (_ Result, note, err error) {
	res, _, note, err := a.restoreEnding(as)
	return res, note, err
}

// restoreEnding is restoreNoted, and ended is the hold of the container's
// last run that its re-add ended (nil for none), for a caller that undoes
// the re-add (keepAndGrow, when the growth is refused) to put it back.
// Refused, it put it back itself.
func (a *Allocator) restoreEnding(as Assignment) (_ Result, ended *endedHold, note, err error) {
	as, infraBefore, ended, problem, err := a.prepareReadd(as)
	if err != nil {
		return Result{}, nil, nil, err
	}
	if problem != nil {
		a.putBack(ended) // refused: the hold of its last run stays
		return Result{}, nil, nil, problem
	}
	if off := a.offline(&as); !off.IsEmpty() {
		a.putBack(ended)
		return Result{}, nil, nil, fmt.Errorf("container %s: CPUs %s are offline", as.ID, off)
	}
	res, note := a.readd(as, infraBefore)
	return res, ended, note, nil
}

// readdHoldingOffline is the one home of the rule that a remembered
// container's offline CPUs are no conflict and stay its own (held offline)
// when it is taken back where it runs (restoreHoldingOffline) or pinned
// back on its record (Repin); any other problem refuses it, and nothing is
// added. note, with no error, says why it was added off its pool's CPUs.
func (a *Allocator) readdHoldingOffline(as Assignment) (_ Result, note, err error) {
	as, infraBefore, ended, problem, err := a.prepareReadd(as)
	if err != nil {
		return Result{}, nil, err
	}
	if problem != nil {
		a.putBack(ended) // refused: the hold of its last run stays
		return Result{}, nil, problem
	}
	res, note := a.readd(as, infraBefore)
	return res, note, nil
}

// keep re-adds a container exactly where it runs even when it may not run
// there (its CPUs conflict with another container's, or lie outside its
// pool as now configured): the error then says so. On a CPU two containers
// claim, the first holder keeps it (see Release). Its CPUs that are
// offline are no conflict: the kernel took them from its cpuset, and they
// stay its own (held offline).
func (a *Allocator) keep(as Assignment) (Result, error) {
	as, infraBefore, _, problem, err := a.prepareReadd(as)
	if err != nil {
		return Result{}, err
	}
	res, err := a.readd(as, infraBefore)
	if problem != nil {
		return res, problem
	}
	return res, err
}

// prepareReadd normalizes a remembered assignment and checks it against
// the node and the configuration: problem is a conflict keep accepts and
// restore refuses; err, an assignment that cannot be re-added at all (no
// CPU of this node left; nothing changed then). A hold of the container's
// last run ends: it runs again, and the hold's CPUs are no conflict. ended
// puts that hold back: a caller that refuses the re-add on problem must
// (putBack), or the container placed anew misses its hold.
func (a *Allocator) prepareReadd(as Assignment) (_ Assignment, _ infraMark, ended *endedHold, problem, err error) {
	// CPUs this node does not have (a state file from another node, a
	// hot-unplugged vCPU) are dropped: nothing may index past the node.
	// Offline ones are the node's, and stay the container's.
	if unknown := a.Absent(as.CPUs.Union(as.Reserved)); !unknown.IsEmpty() {
		problem = fmt.Errorf("container %s: CPUs %s are not on this node", as.ID, unknown)
		as.CPUs, as.Reserved = as.CPUs.Difference(unknown), as.Reserved.Difference(unknown)
	}
	if as.CPUs.IsEmpty() {
		if problem != nil {
			return as, infraMark{}, nil, nil, problem
		}
		return as, infraMark{}, nil, nil, fmt.Errorf("container %s: empty cpuset", as.ID)
	}
	if as.Reserved.Size() == 0 {
		as.Reserved = cpuset.New()
	}
	if pools.IsExclusive(as.Pool) {
		// Mems as the runtime shows them, or a state file from another
		// machine, may name nodes this one lacks: writing them would fail.
		as.Mems = a.knownMems(as.Mems)
	}
	if as.Mems.Size() == 0 {
		as.Mems = a.memsOf(&as)
	}
	if !cpuset.New(as.Added...).IsSubsetOf(as.CPUs) {
		as.Added = nil // a record that does not match where it runs: all original
	}
	infraBefore := a.markInfra()
	// The container runs again: its last run's hold is over.
	ended = a.endOwnHold(&as)
	if pools.IsExclusive(as.Pool) && problem == nil {
		for _, cpu := range as.Held().List() {
			if o := a.owner[cpu]; o != "" && o != as.ID {
				problem = fmt.Errorf("container %s: CPU %d is already held by container %s", as.ID, cpu, o)
				break
			}
		}
		// Its online CPUs must be in its pool as now configured; its
		// offline ones are checked on the carving (offlinecarved.go).
		if on := as.Held().Difference(a.offline(&as)); problem == nil && !on.IsSubsetOf(a.keepable(as.Pool)) {
			problem = fmt.Errorf("container %s: %s", ShortID(as.ID), outsidePool(on.Difference(a.keepable(as.Pool)), as.Pool, a.layout.Pool(as.Pool)))
		}
		if elsewhere, _ := a.recordOfflineElsewhere(&as); problem == nil && !elsewhere.IsEmpty() {
			problem = offlineElsewhereError("container "+ShortID(as.ID), elsewhere, as.Pool)
		}
	}
	return as, infraBefore, ended, problem, nil
}

// readd adds a prepared assignment. Members of a shared or infra pool
// follow the pool as it is now, and the shared part of an exclusive
// container that asked for it follows the shared pool. While the pool has
// no free CPU they run where MembersCPUs puts them, on the other pool, as
// a hotplug seen live moves them and the live decisions keep them
// (followInfra): every CPU of it offline, held by an exclusive container
// kept where it runs after a config change, or none in the config. Never
// where they ran: a config change may have handed those CPUs to an
// exclusive pool, which would give them to the next container while they
// still run there. The error says why a member is not on its pool's CPUs
// (the reason a reload is refused, and what a restart logs), unless its
// CPUs are offline; a shared part's, when exclusive containers hold the
// whole shared pool.
func (a *Allocator) readd(as Assignment, infraBefore infraMark) (Result, error) {
	var problem error
	if as.WithShared && pools.IsExclusive(as.Pool) {
		// Less its own exclusive CPUs, which the shared pool as now
		// configured may name (a container kept where it runs after a
		// config change): they are its exclusive part, not shared.
		if now := a.MembersCPUs(pools.Shared).Difference(as.Held()); !now.IsEmpty() {
			as.Shared = now
			problem = a.sharedHeld(as.ID, "its shared part", now)
		}
	}
	if as.Pool == pools.Shared || as.Pool == pools.Infra {
		if now := a.MembersCPUs(as.Pool); !now.IsEmpty() {
			problem = a.notOnItsPool(as, now)
			as.CPUs = now
			as.Mems = a.memsFor(as.CPUs)
		} else {
			problem = fmt.Errorf("container %s: pool %s has no CPUs as now configured, nor has pool %s; it stays on %s", as.ID, as.Pool, otherMembersPool(as.Pool), as.CPUs)
		}
	}
	return a.commit(&as, infraBefore), problem
}

// notOnItsPool says why a member of pool shared or infra is placed on
// the other pool's CPUs (now), or nil when it is on its own pool's or
// only its pool's CPUs being offline keeps it off them.
func (a *Allocator) notOnItsPool(as Assignment, now cpuset.CPUSet) error {
	if !a.PoolCPUs(as.Pool).IsEmpty() || a.allOffline(as.Pool) {
		return nil
	}
	if a.layout.Pool(as.Pool).IsEmpty() {
		return fmt.Errorf("container %s: pool %s has no CPUs as now configured; it runs on pool %s (%s) instead of %s", as.ID, as.Pool, otherMembersPool(as.Pool), now, as.CPUs)
	}
	return a.sharedHeldBy(as.ID, "it", as.Pool, now)
}

// sharedHeld says that what of container id runs on infra's CPUs (now)
// because exclusive containers kept where they run hold every CPU of the
// shared pool, or nil when they do not.
func (a *Allocator) sharedHeld(id, what string, now cpuset.CPUSet) error {
	if !a.PoolCPUs(pools.Shared).IsEmpty() || a.layout.Pool(pools.Shared).IsEmpty() {
		return nil
	}
	return a.sharedHeldBy(id, what, pools.Shared, now)
}

// sharedHeldBy is sharedHeld's message, for pool shared or infra: only
// an exclusive container kept where it runs after a config change holds
// a shared CPU, and only exclusive-non-isolcpus borrows infra's.
func (a *Allocator) sharedHeldBy(id, what, pool string, now cpuset.CPUSet) error {
	by := "an exclusive container (one kept where it runs after a config change)"
	if pool == pools.Infra {
		by = "exclusive-non-isolcpus containers"
	}
	return fmt.Errorf("container %s: every CPU of pool %s (%s) is held by %s; %s runs on pool %s (%s) until one is free",
		ShortID(id), pool, a.layout.Pool(pool), by, what, otherMembersPool(pool), now)
}

// Adopted is what became of a running container the allocator had no
// record of.
type Adopted int

const (
	// StaysWhereItRuns: it runs on a free exclusive set of the size it
	// asks for (or the kubelet's allocation), an earlier decision of ours,
	// and keeps it; the runtime need not be told anything.
	StaysWhereItRuns Adopted = iota + 1
	// PlacedAsNew: it was placed like a new container (for an exclusive
	// pool, the runtime must be told to pin it there), or, with an error,
	// refused, and nothing was added.
	PlacedAsNew
)

func (o Adopted) String() string {
	switch o {
	case StaysWhereItRuns:
		return "stays where it runs"
	case PlacedAsNew:
		return "placed as new"
	}
	return fmt.Sprintf("Adopted(%d)", int(o))
}

// Adopt takes in a running container the allocator has no record of (it
// was created while the plugin was away, or the state was lost). current
// and mems are the cpuset and cpuset.mems the runtime runs it on (empty
// when not pinned). If it already runs on a free exclusive set of the
// requested size — an earlier decision of ours — it StaysWhereItRuns, its
// memory counted on the nodes of its mems (which may reach beyond its
// CPUs' nodes: rule 0) and its mems kept as they are; a set of fewer CPUs
// that are free and its pool's is kept and grown by the rest
// (keepAndGrow); otherwise it is PlacedAsNew, by the creation's rules but
// for free_hugepages, which is no floor for a container that runs.
func (a *Allocator) Adopt(req Request, current, mems cpuset.CPUSet) (Result, Adopted, error) {
	// It runs: placed anew or not, the pages it touched are its own, and
	// free_hugepages, which lacks them, is no floor (issue 41, item 7).
	req.running = true
	if req.WithShared {
		// Its exclusive part is what it runs on beside the shared pool.
		current = current.Difference(a.PoolCPUs(pools.Shared))
		// Its shared part may run on infra (readd, while the shared pool
		// is fully held): the rest is its exclusive part.
		if excl := current.Difference(a.sharedPartBeside(req.Pool, cpuset.New())); !excl.IsEmpty() {
			current = excl
		}
	}
	if pools.IsExclusive(req.Pool) && req.CPUs.Size() > 0 && !cpulist.Equal(current, req.CPUs) {
		// The kubelet's allocation is the truth for its containers.
		if req.onlyWhereItRuns {
			return Result{}, PlacedAsNew, fmt.Errorf("container %s does not run where it may stay", req.ID)
		}
		res, err := a.Allocate(req)
		return res, PlacedAsNew, err
	}
	if pools.IsExclusive(req.Pool) && current.Size() > 0 && (current.Size() == CPUsFor(req.MilliCPU) || cpulist.Equal(current, req.CPUs)) {
		as := Assignment{ID: req.ID, Pod: req.Pod, Container: req.Container, Pool: req.Pool, MilliCPU: req.MilliCPU, CPUs: current,
			NoCPUQuota: liftsCPUQuota(req), IsolateIRQs: req.IsolateIRQs, IsolatedPartition: req.IsolatedPartition,
			PowerClass: req.PowerClass, WithShared: req.WithShared, Shared: a.PoolCPUs(pools.Shared), Rule: req.Rule}
		if req.Options.HideHyperthreads {
			// The siblings it was given idle are not in its cpuset; the
			// annotation says they are its.
			as.Reserved, as.HideHyperthreads = a.hiddenSiblings(current), true
		}
		as.Mems = a.knownMems(mems)
		as.Memory = a.MemoryOf(as, req.Demand) // counted where it runs
		if res, err := a.restore(as); err == nil {
			return res, StaysWhereItRuns, nil
		}
	}
	if res, ok := a.keepAndGrow(req, current, mems); ok {
		return res, PlacedAsNew, nil
	}
	if req.onlyWhereItRuns {
		return Result{}, PlacedAsNew, fmt.Errorf("container %s does not run where it may stay", req.ID)
	}
	res, err := a.Allocate(req)
	return res, PlacedAsNew, err
}

// keepAndGrow adopts an exclusive container that runs on fewer CPUs than
// it asks for (e.g. cgroup v1 dropped some that went offline, or its
// record's others left its pool) on the CPUs it runs on, when every one of
// them is free (no other container's, nor a hold's), online and its pool's
// as now configured, and grows it by the rest as a live grow does
// (Resize): placed anew it was moved off CPUs it runs on and may keep. A
// set of more CPUs than it asks for is placed anew: which of them to keep
// is no earlier decision of ours, and a new placement has the creation's
// shape. So is a container with a kubelet allocation (its CPUs are the
// kubelet's), a NUMA restriction (its set may break it), shared CPUs
// beside or hidden siblings (their shape is the creation's), and a
// full-pcpus-only one on split cores, counting offline threads
// (lacksAThread: kept threads of split cores and grown by whole ones, it
// would be on split cores, which no creation gives it); on whole cores it
// is kept, and Resize grows it by whole cores, or refuses a count that is
// none (placed anew, refused alike). A hold of its
// last run (same pod and container) ends once it is kept, as any re-add
// ends it; refused, or kept and then not grown, the hold is as it was, and
// Allocate gives it back when it fits (ownHoldFits); the infra and shared
// members the re-add moved are back where they were (restoreFollowers). It
// tells whether it was adopted; when not, nothing was added and nothing
// dropped. It keeps, tries the growth and undoes, rather than deciding
// first: the growth's placement reads the allocator as the keeping leaves
// it (the hold's CPUs free, the kept ones the container's, its memory
// counted), which no placement can be shown without making it. The undo is
// checked record by record against the allocator before it
// (TestAdoptKeptButNotGrown*LeavesTheAllocatorAsItFoundIt).
func (a *Allocator) keepAndGrow(req Request, current, mems cpuset.CPUSet) (Result, bool) {
	n := CPUsFor(req.MilliCPU)
	if !pools.IsExclusive(req.Pool) || req.onlyWhereItRuns || current.IsEmpty() || current.Size() >= n || req.CPUs.Size() > 0 ||
		req.NUMANodes.Size() > 0 || req.WithShared || req.Options.HideHyperthreads || req.Options.FullPCPUsOnly && a.lacksAThread(current) {
		return Result{}, false
	}
	as := Assignment{ID: req.ID, Pod: req.Pod, Container: req.Container, Pool: req.Pool, MilliCPU: int64(current.Size()) * 1000, CPUs: current,
		NoCPUQuota: liftsCPUQuota(req), IsolateIRQs: req.IsolateIRQs, IsolatedPartition: req.IsolatedPartition,
		PowerClass: req.PowerClass, Rule: req.Rule}
	as.Mems = a.knownMems(mems)
	as.Memory = a.MemoryOf(as, req.Demand) // counted where it runs
	was := a.markFollowers()
	kept, ended, _, err := a.restoreEnding(as)
	if err != nil {
		return Result{}, false // not free, offline or not its pool's
	}
	grown, err := a.Resize(req)
	if err != nil {
		// Nothing added, nothing dropped: placed anew instead, where
		// Allocate finds the hold of its last run. The members the
		// re-add and Release moved go back to where they run: their
		// updates are not sent, and infra is as it was once the hold
		// lends its CPUs again.
		a.Release(req.ID)
		a.putBack(ended)
		a.restoreFollowers(was)
		return Result{}, false
	}
	// Placed by its request, as a new container is: every CPU is one it
	// was created with, which a resize never gives back (shrink), not the
	// kept part alone with the rest a grow's.
	a.containers[req.ID].Added = nil
	grown.Assignment.Added = nil
	grown.Updates = append(kept.Updates, grown.Updates...)
	grown.InfraChanged = grown.InfraChanged || kept.InfraChanged
	return grown, true
}

// lacksAThread tells whether cpus lack a thread, online or offline, of a
// core they have a thread of: keepAndGrow's guard for a full-pcpus-only
// container. An offline thread counts: nothing holds it for the
// container, so once online it is a free exclusive CPU, and the next
// container placed would share a core with it (partCore, which leaves
// offline threads out, would call such a set whole). A CPU of no known
// core, in cpus or offline on the node, may be a thread of any of its
// cores: it counts as lacking too (placed anew, as before keepAndGrow
// kept full-pcpus-only containers).
func (a *Allocator) lacksAThread(cpus cpuset.CPUSet) bool {
	cores := make(map[int]bool, cpus.Size())
	for _, id := range cpus.UnsortedList() {
		if !a.x.present(id) || a.x.cpus[id].core < 0 {
			return true
		}
		cores[a.x.cpus[id].core] = true
	}
	for id, c := range a.x.cpus {
		if !c.present || cpus.Contains(id) {
			continue
		}
		if cores[c.core] || c.core < 0 && !c.online {
			return true
		}
	}
	return false
}

// knownMems are the nodes of mems the runtime reported that pinned memory
// may name: nodes of this machine with memory; empty (the CPUs' nodes then)
// when it names none, or when memory is not pinned.
func (a *Allocator) knownMems(mems cpuset.CPUSet) cpuset.CPUSet {
	if !a.pinMemory || mems.IsEmpty() {
		return cpuset.New()
	}
	var out []int
	for _, node := range a.x.topo.NUMANodes {
		if node.HasMemory && mems.Contains(node.ID) {
			out = append(out, node.ID)
		}
	}
	return cpuset.New(out...)
}

// RestoreHold re-adds a remembered hold (after a restart of the plugin). It
// is refused, and the caller forgets it, if a CPU is not on this node, an
// online one is outside its pool as now configured, or one is taken by a
// container that runs: the runtime is the truth about running containers,
// a hold only a memory. Its offline CPUs stay its own, but for those the
// config in force carves into another pool (offlinecarved.go): they leave
// the hold, the rest is held, and the Result's Warning says so; with none
// of its CPUs left it is refused.
func (a *Allocator) RestoreHold(h Hold) (Result, error) {
	if h.Pod.UID == "" || h.Container == "" || !pools.IsExclusive(h.Pool) || h.CPUs.IsEmpty() {
		return Result{}, fmt.Errorf("hold %s/%s: incomplete (pool %q, CPUs %q)", h.Pod.UID, h.Container, h.Pool, h.CPUs)
	}
	if h.Reserved.Size() == 0 {
		h.Reserved = cpuset.New()
	}
	key := h.restartKey()
	if absent := a.Absent(h.Held()); !absent.IsEmpty() {
		return Result{}, fmt.Errorf("hold %s: CPUs %s are not on this node", key, absent)
	}
	h, warning, err := a.dropOfflineElsewhere(h)
	if err != nil {
		return Result{}, err
	}
	for _, cpu := range h.Held().List() {
		if o := a.owner[cpu]; o != "" && o != h.ID {
			return Result{}, fmt.Errorf("hold %s: CPU %d is in use by container %s", key, cpu, o)
		}
	}
	// Its offline CPUs stay the hold's (the kernel may bring them back
	// while the pod lives); the others must be in the pool.
	if on := h.Held().Difference(a.offline(&h.Assignment)); !on.IsSubsetOf(a.keepable(h.Pool)) {
		return Result{}, fmt.Errorf("hold %s: %s", key, outsidePool(on.Difference(a.keepable(h.Pool)), h.Pool, a.layout.Pool(h.Pool)))
	}
	for _, c := range a.containers {
		if c.ID == h.ID || (c.Pod.UID == h.Pod.UID && c.Container == h.Container) {
			return Result{}, fmt.Errorf("hold %s: the container runs again (%s)", key, c.ID)
		}
	}
	if old, ok := a.holds[key]; ok {
		a.dropHold(key, old)
	}
	infraBefore := a.markInfra()
	if h.Mems.Size() == 0 {
		h.Mems = a.memsOf(&h.Assignment)
	}
	hold := h
	a.holds[key] = &hold
	for _, cpu := range h.Held().UnsortedList() {
		a.setOwner(cpu, h.ID)
	}
	a.mem.Set(h.ID, h.Memory)
	res := Result{Assignment: h.Assignment, Warning: warning}
	res.Updates, res.InfraChanged = a.followInfra(infraBefore)
	return res, nil
}

// heldByOthers returns the CPUs of cpus that an exclusive container (or a
// hold) other than id has, online or offline.
func (a *Allocator) heldByOthers(cpus cpuset.CPUSet, id string) cpuset.CPUSet {
	var out []int
	for _, c := range cpus.UnsortedList() {
		if a.x.present(c) && a.owner[c] != "" && a.owner[c] != id {
			out = append(out, c)
		}
	}
	return cpuset.New(out...)
}

// hiddenSiblings returns the other threads of the cores of cpus: what a
// hide-hyperthreads container keeps idle.
func (a *Allocator) hiddenSiblings(cpus cpuset.CPUSet) cpuset.CPUSet {
	var out []int
	for _, id := range cpus.UnsortedList() {
		if !a.x.online(id) || a.x.cpus[id].core < 0 {
			continue
		}
		for _, t := range a.x.cores[a.x.cpus[id].core] {
			if !cpus.Contains(t) {
				out = append(out, t)
			}
		}
	}
	return cpuset.New(out...)
}

// MemoryOf is what a remembered container holds of the nodes' memory at a
// restart, given its demand as the runtime shows it now: the record's
// holdings when they add up to that demand on nodes of its mems, else (a
// record of an older version, one the demand outgrew, or one naming other
// nodes) the demand taken from the nodes of
// its mems, or of its CPUs, in id order, each up to what the others do
// not hold, the last taking the rest. The live free_hugepages is no floor:
// the container runs, and the pages it touched are its own. Nothing for a
// container whose memory is not counted.
func (a *Allocator) MemoryOf(as Assignment, d numamem.Demand) []numamem.NodeMemory {
	req := Request{Pool: as.Pool, Demand: d}
	if !a.countsMemory(req) {
		return nil
	}
	nodes := a.knownMems(as.Mems) // the runtime's may name nodes this machine lacks
	if nodes.IsEmpty() {
		nodes = a.memsFor(as.CPUs)
	}
	// The record is trusted only where the container's memory can be: on
	// nodes of its mems. A record naming another node (another machine's
	// state file, an edit) would count its pages where they are not, and
	// leave its own free for another container.
	if numamem.DemandOf(as.Memory).Equal(d) && numamem.NodeSet(as.Memory).IsSubsetOf(nodes) {
		return as.Memory
	}
	return a.runningFit(req).Split(nodes.List())
}
