package allocator

// A container taken back at a restart (Readmit, Repin, Adopt) runs again,
// so the hold of its last run (same pod and container) ends; but the
// re-add is checked with that hold gone (its CPUs are the container's
// own, no conflict), and may still be refused. A refused re-add must
// leave the allocator as it found it: the container is then placed anew,
// and Allocate gives it its hold back (ownHoldFits), or a later round
// (Repin, keepAndGrow's caller) finds the hold where it was. endedHold is
// what puts the hold back exactly.

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// endedHold is a hold of a container's last run that a re-add ended, as
// it was before: its CPUs' owners (a hold may share a CPU with a container
// kept where it runs, see otherHolder) and its memory in the account.
type endedHold struct {
	key    string
	hold   *Hold
	owners map[int]string
	memory []numamem.NodeMemory
}

// endOwnHold ends the hold of as's last run, if it has one (a container
// of no known pod has none), and returns what puts it back; nil when there
// was none.
func (a *Allocator) endOwnHold(as *Assignment) *endedHold {
	if as.Pod.UID == "" {
		return nil
	}
	key := as.restartKey()
	h, ok := a.holds[key]
	if !ok {
		return nil
	}
	e := &endedHold{key: key, hold: h, owners: map[int]string{}, memory: a.mem.Held(h.ID)}
	for _, cpu := range h.Held().UnsortedList() {
		e.owners[cpu] = a.owner[cpu]
	}
	a.dropHold(key, h)
	return e
}

// putBack restores an ended hold as it was, once what ended it was
// refused and undone (nothing of it left added). The hold is back in the
// index before its memory, so the account's claims find its owner
// (claimOwners). Nothing for nil.
func (a *Allocator) putBack(e *endedHold) {
	if e == nil {
		return
	}
	a.holds[e.key] = e.hold
	for cpu, o := range e.owners {
		a.setOwner(cpu, o)
	}
	a.mem.Set(e.hold.ID, e.memory)
}

// followed is what followInfra moves of other containers' records, as it
// was before a re-add that may be undone: the CPUs and mems of the infra
// and shared pools' members, and the shared part of exclusive containers
// that asked for it. A re-add that ends a hold lends the hold's
// exclusive-non-isolcpus CPUs back to infra, and its commit moves the
// members onto the bigger infra; Release moves them again, but putBack
// lends the CPUs once more with no followInfra after it, and the updates
// of those moves are not sent (nothing was added). Only the records as
// they were match where the members run and infra as it is once the hold
// is back.
type followed map[string]followedRecord

type followedRecord struct{ cpus, mems, shared cpuset.CPUSet }

// markFollowed remembers the records followInfra may move.
func (a *Allocator) markFollowed() followed {
	f := followed{}
	for id, c := range a.containers {
		if c.Pool == pools.Infra || c.Pool == pools.Shared || c.WithShared && pools.IsExclusive(c.Pool) {
			f[id] = followedRecord{cpus: c.CPUs, mems: c.Mems, shared: c.Shared}
		}
	}
	return f
}

// restoreFollowed puts the records of f back as they were, once the
// re-add is undone and the hold it ended put back (putBack): infra is then
// as it was when f was marked, and so are its members.
func (a *Allocator) restoreFollowed(f followed) {
	for id, r := range f {
		if c, ok := a.containers[id]; ok {
			c.CPUs, c.Mems, c.Shared = r.cpus, r.mems, r.shared
		}
	}
}
