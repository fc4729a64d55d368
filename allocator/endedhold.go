package allocator

// A container taken back at a restart (Readmit, Repin, Adopt) runs again,
// so the hold of its last run (same pod and container) ends; but the
// re-add is checked with that hold gone (its CPUs are the container's
// own, no conflict), and may still be refused. A refused re-add must
// leave the allocator as it found it: the container is then placed anew,
// and Allocate gives it its hold back (ownHoldFits), or a later round
// (Repin, keepAndGrow's caller) finds the hold where it was. endedHold is
// what puts the hold back exactly.
//
// This file is the hold alone, the container's own record. The records of
// other containers a committed re-add moved (infra and shared followers)
// are put back by followers.go, which only keepAndGrow needs: the other
// callers refuse before anything is committed, so nothing followed.

import (
	"github.com/cpupool/nri-cpupool/numamem"
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
