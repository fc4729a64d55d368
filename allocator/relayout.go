package allocator

// A new layout while containers run: a config reload (Relayout) and CPUs
// going online or offline (Rebase). Nothing that runs ever moves: a reload
// is refused when it would move a running container or a hold, and a CPU
// the kernel took offline under a container stays that container's.

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Blocker is a running container, or a hold of a stopped one, that a new
// layout would move: the reason a reload is refused.
type Blocker struct {
	// Who names the container for people (namespace/pod/container).
	Who string
	// ID is the container's id (the stopped container's, for a hold).
	ID string
	// Pool is its pool; CPUs, those of its CPUs the new layout does not
	// leave it (all of them when the reason is not about CPUs).
	Pool string
	CPUs cpuset.CPUSet
	// Held tells that it is a hold of a stopped container.
	Held bool
	// Pending tells that it is CPUs given for a container not created
	// yet (a kubelet allocation, a prepared DRA claim): Who says what.
	Pending bool
	Reason  string
}

func (b Blocker) String() string {
	what := "container "
	switch {
	case b.Held:
		what = "CPUs held for stopped container "
	case b.Pending:
		what = ""
	}
	return fmt.Sprintf("%s%s (%s, CPUs %s): %s", what, b.Who, b.Pool, b.CPUs, b.Reason)
}

// Relayout is a reload's decision: an allocator for the new layout on the
// same node that holds every container and hold where it is now, or the
// containers and holds that stop it. It uses the restart's rules: each
// running assignment is re-admitted into an allocator of the new layout
// built off to the side (Readmit, RestoreHold), as a restart with the new
// config would re-admit it, and the reload is refused if any of them is
// not kept exactly where it is. A shared or infra member moving to its
// pool as now configured is no move: members follow their pool. The
// receiver is not changed.
func (a *Allocator) Relayout(layout *Layout) (*Allocator, []Blocker) {
	trial := New(a.x.topo, layout, a.pinMemory)
	var blockers []Blocker
	for _, id := range a.sortedIDs() {
		c := *a.containers[id]
		who := c.Pod.ContainerName(c.Container)
		r := Remembered{Assignment: onlineOnly(a.x, c), RunsOn: cpuset.New()}
		if pools.IsExclusive(c.Pool) {
			if r.Assignment.CPUs.IsEmpty() {
				continue // every CPU it has is offline: nothing to check
			}
			r.RunsOn = r.Assignment.CPUs
			if c.WithShared {
				r.RunsOn = r.RunsOn.Union(c.Shared)
			}
		}
		_, outcome, err := trial.Readmit(r)
		if outcome == Kept && err == nil {
			continue
		}
		reason := outcome.String()
		if err != nil {
			reason = err.Error()
		}
		blockers = append(blockers, Blocker{Who: who, ID: c.ID, Pool: c.Pool, CPUs: outside(c, layout), Reason: reason})
	}
	for _, key := range a.sortedHoldKeys() {
		h := *a.holds[key]
		h.Assignment = onlineOnly(a.x, h.Assignment)
		if h.CPUs.IsEmpty() {
			continue
		}
		if _, err := trial.RestoreHold(h); err != nil {
			blockers = append(blockers, Blocker{Who: h.Pod.ContainerName(h.Container), ID: h.ID, Pool: h.Pool, CPUs: outside(h.Assignment, layout), Held: true, Reason: err.Error()})
		}
	}
	if len(blockers) > 0 {
		return nil, blockers
	}
	// The trial lacks CPUs held while offline; the allocator kept is the
	// receiver's assignments carried over as they are.
	next, _ := a.Rebase(a.x.topo, layout)
	return next, nil
}

// onlineOnly is an exclusive assignment without its offline CPUs, which a
// new layout cannot hold (they are in no pool) and which stay its own. A
// reload judges them apart (plugin/reload_offline.go): whether the new
// config may give them to another pool when they come back.
func onlineOnly(x *index, as Assignment) Assignment {
	if !pools.IsExclusive(as.Pool) {
		return as
	}
	var off []int
	for _, cpu := range as.Held().UnsortedList() {
		if !x.online(cpu) {
			off = append(off, cpu)
		}
	}
	if len(off) == 0 {
		return as
	}
	gone := cpuset.New(off...)
	as.CPUs, as.Reserved = as.CPUs.Difference(gone), as.Reserved.Difference(gone)
	as.Added = nil
	return as
}

// outside are an exclusive assignment's online CPUs the layout does not
// give its pool, or all of them when it does (the conflict is another).
func outside(as Assignment, layout *Layout) cpuset.CPUSet {
	if pools.IsExclusive(as.Pool) {
		if out := as.Held().Difference(layout.Pool(as.Pool)).Intersection(layout.Online); !out.IsEmpty() {
			return out
		}
	}
	return as.Cpuset()
}

// Rebase returns an allocator for topo and layout that holds every
// container and hold of the receiver on exactly the CPUs it has now, and
// the shared and infra members, and the shared part of exclusive
// containers that run on the shared pool too, that follow their pool as
// the new layout has it (moved), or while every CPU of their pool is
// offline, the other pool of members (MembersCPUs). It decides nothing: CPUs going offline
// is what the kernel did (Relayout decides a reload). An exclusive CPU
// that is offline, in no pool of the layout, stays owned by its container
// or hold, so that it is never handed out while its owner lives, whether
// or not it comes back online; once the owner ends, it is free again only
// if the layout has it in a pool. A hide-hyperthreads container's (or
// hold's) sibling that is online and free now, one that came online, is
// its own, idle (ReserveHiddenSiblings). The receiver is not changed.
func (a *Allocator) Rebase(topo *sysfs.Topology, layout *Layout) (*Allocator, []Assignment) {
	n := New(topo, layout, a.pinMemory)
	n.overlapped = a.overlapped
	own := func(as *Assignment) {
		n.mem.Set(as.ID, as.Memory)
		for _, cpu := range as.Held().UnsortedList() {
			if cpu >= len(n.owner) {
				continue // not present any more: no index to keep it at
			}
			switch n.owner[cpu] {
			case "":
				n.setOwner(cpu, as.ID)
			case as.ID:
			default:
				n.overlapped = true
			}
		}
	}
	for _, id := range a.sortedIDs() {
		c := *a.containers[id]
		n.addContainer(&c)
		if pools.IsExclusive(c.Pool) {
			own(&c)
		}
	}
	for _, key := range a.sortedHoldKeys() {
		h := *a.holds[key]
		n.holds[key] = &h
		own(&h.Assignment)
	}
	// Siblings that came online of the cores of hide-hyperthreads
	// containers are theirs, idle, before infra's members follow infra.
	n.reserveHiddenSiblings()
	var moved []Assignment
	// Members of a pool whose CPUs are all offline run on the other pool
	// meanwhile (MembersCPUs), not on their offline CPUs.
	infra := n.MembersCPUs(pools.Infra)
	shared := n.MembersCPUs(pools.Shared)
	for _, id := range n.sortedIDs() {
		c := n.containers[id]
		switch {
		case c.Pool == pools.Infra && !infra.IsEmpty() && !cpulist.Equal(c.CPUs, infra):
			c.CPUs, c.Mems = infra, n.memsFor(infra)
		case c.Pool == pools.Shared && !shared.IsEmpty() && !cpulist.Equal(c.CPUs, shared):
			c.CPUs, c.Mems = shared, n.memsFor(shared)
		case c.WithShared && pools.IsExclusive(c.Pool):
			now := shared.Difference(c.Held())
			if now.IsEmpty() || cpulist.Equal(c.Shared, now) {
				continue
			}
			c.Shared = now
		default:
			continue
		}
		moved = append(moved, *c)
	}
	return n, moved
}

// OfflineHeld are the CPUs that containers and holds keep although they
// are offline, by the id of the container (or stopped container) that
// keeps them.
func (a *Allocator) OfflineHeld() map[string]cpuset.CPUSet {
	out := map[string]cpuset.CPUSet{}
	for _, c := range a.containers {
		if off := a.offline(c); !off.IsEmpty() {
			out[c.ID] = off
		}
	}
	for _, h := range a.holds {
		if off := a.offline(&h.Assignment); !off.IsEmpty() {
			out[h.ID] = off
		}
	}
	return out
}

// HotplugLayout is the layout once the node's online CPUs are topo's:
// the old layout less the CPUs that went offline, so that no CPU that
// stayed online changes pools, and each CPU that came online in the pool
// the config gives it (BuildLayoutRunning, which carves on the present
// CPUs as a start and a reload do), or in infra when the config cannot be
// laid out on the node as it is now (a count that no longer fits the
// present CPUs: the problems say why); a reserved CPU is reserved again
// then too.
func HotplugLayout(old *Layout, topo *sysfs.Topology, cfg *config.Config) (*Layout, config.Problems) {
	online := topo.Online
	l := *old
	l.Online = online
	for _, set := range []*cpuset.CPUSet{&l.Isolated, &l.Reserved, &l.Exclusive, &l.Shared, &l.Infra, &l.ExclusiveNonIsolcpus} {
		*set = set.Intersection(online)
	}
	// The carving says where an offline CPU goes when it comes online
	// (markOfflineThreads, OfflineHiddenSiblings), and that is the
	// config's on the node as it is now, not as it was: a carving made
	// with SMT off has no second thread and would say every sibling that
	// goes offline later joins another pool. While the config fails, a
	// CPU that comes online goes to infra (below): no offline CPU joins
	// exclusive then.
	fresh, problems := BuildLayoutRunning(topo, cfg)
	if !problems.HasErrors() {
		l.carved = fresh.carved
	}
	added := online.Difference(old.Online)
	if added.IsEmpty() {
		if problems.HasErrors() {
			l.carved = l.carvingWhileFailing(topo)
		}
		return &l, nil
	}
	if problems.HasErrors() {
		// The lists the config gives do not depend on the counts that
		// failed: a reserved CPU is reserved again, an isolated one is
		// isolated again, and neither is lent.
		l.Isolated = l.Isolated.Union(fresh.Isolated.Intersection(added))
		l.Reserved = l.Reserved.Union(fresh.Reserved.Intersection(added))
		l.Infra = l.Infra.Union(added)
		if cfg.Pools.ExclusiveNonIsolcpus.Enabled {
			l.ExclusiveNonIsolcpus = l.ExclusiveNonIsolcpus.Union(lendableCPUs(added, l.Reserved, l.Isolated))
		}
		l.carved = l.carvingWhileFailing(topo)
		return &l, problems
	}
	for _, p := range []struct{ to, from *cpuset.CPUSet }{{&l.Isolated, &fresh.Isolated}, {&l.Reserved, &fresh.Reserved},
		{&l.Exclusive, &fresh.Exclusive}, {&l.Shared, &fresh.Shared}, {&l.Infra, &fresh.Infra}, {&l.ExclusiveNonIsolcpus, &fresh.ExclusiveNonIsolcpus}} {
		*p.to = p.to.Union(p.from.Intersection(added))
	}
	return &l, problems
}

// carvingWhileFailing is where the offline CPUs go when they come online
// while the config cannot be laid out on the node (HotplugLayout): to
// infra, as every CPU that comes online then, so none joins exclusive.
// The reserved and isolated lists do not depend on the counts that fail.
func (l *Layout) carvingWhileFailing(topo *sysfs.Topology) carvedPools {
	return carvedPools{exclusive: l.Exclusive, infra: topo.Present.Difference(l.Exclusive).Difference(l.Shared),
		reserved: l.carved.reserved.Union(l.Reserved), isolated: l.carved.isolated.Union(l.Isolated), whileFailing: true}
}
