package allocator

// A re-add that is committed and then undone (keepAndGrow: kept where it
// runs, then its growth refused) has moved other containers' records on
// the way: the ended hold lent its exclusive-non-isolcpus CPUs to infra,
// and the commit's followInfra moved infra's members, and the shared
// pool's users running on infra, onto the bigger infra. Release moves them
// again, onto infra without the container; putBack then lends the hold's
// CPUs once more, but no followInfra runs after it, and the updates of
// those moves were never sent (nothing was added). So the records are put
// back as they were, which is where the members still run. This is apart
// from the hold (endedhold.go): the hold is the container's own record,
// these are the other containers'.

import (
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// followerRecords are the records followInfra moves of other containers,
// by id, as they were before a re-add that may be undone: the CPUs and
// mems of the infra and shared pools' members, and the shared part of
// exclusive containers that asked for it (see above for why).
type followerRecords map[string]followerRecord

type followerRecord struct{ cpus, mems, shared cpuset.CPUSet }

// markFollowers remembers the records followInfra may move.
func (a *Allocator) markFollowers() followerRecords {
	f := followerRecords{}
	for id, c := range a.containers {
		if c.Pool == pools.Infra || c.Pool == pools.Shared || c.WithShared && pools.IsExclusive(c.Pool) {
			f[id] = followerRecord{cpus: c.CPUs, mems: c.Mems, shared: c.Shared}
		}
	}
	return f
}

// restoreFollowers puts the records of f back as they were, once the
// re-add is undone and the hold it ended put back (putBack): infra is then
// as it was when f was marked, and so are its members.
func (a *Allocator) restoreFollowers(f followerRecords) {
	for id, r := range f {
		if c, ok := a.containers[id]; ok {
			c.CPUs, c.Mems, c.Shared = r.cpus, r.mems, r.shared
		}
	}
}
