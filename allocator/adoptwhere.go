package allocator

// Adoption in two rounds (see recover.go): the containers the state file
// does not know but the runtime runs pinned are taken in where they run
// before any remembered container is pinned again, so that a repin onto
// remembered CPUs, or a placement anew, never takes the CPUs a running
// container runs on.

import (
	"k8s.io/utils/cpuset"
)

// AdoptWhereItRuns is Adopt for a container only if it StaysWhereItRuns:
// it runs on a free set of its exclusive pool of the size it asks for (or
// the kubelet's allocation). Otherwise nothing is added and ok is false:
// the caller adopts it later, with Adopt.
func (a *Allocator) AdoptWhereItRuns(req Request, current, mems cpuset.CPUSet) (res Result, ok bool) {
	req.onlyWhereItRuns = true
	res, how, err := a.Adopt(req, current, mems)
	return res, err == nil && how == StaysWhereItRuns
}
