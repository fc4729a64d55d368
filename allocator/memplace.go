package allocator

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
)

// placed is an exclusive placement with the memory it holds.
type placed struct {
	cpus, reserved cpuset.CPUSet
	memory         []numamem.NodeMemory
	warning        string
	// onFirst tells that each node holds the whole demand: it is all
	// taken from the first node of the CPUs' mems (onFirstNode), which
	// the caller works out anyway.
	onFirst bool
}

// placeWithMemory places an exclusive request, its CPUs where its memory
// fits when the allocator counts its memory (rule 0 of docs/placement.md):
// only sets of NUMA nodes whose memory holds the request are candidates,
// and the placement rules choose among them. When no set of nodes holds its
// hugepages, the request is refused with what each node has; when no set
// holds its memory limit, it is placed by the other rules with a warning.
// cached, when not nil, is the request's fit already worked out
// (liveCounts).
func (a *Allocator) placeWithMemory(req Request, cached *numamem.Fit) (placed, error) {
	if !a.countsMemory(req) {
		cpus, reserved, err := a.placeExclusive(req)
		return placed{cpus: cpus, reserved: reserved}, err
	}
	fit := cached
	if fit == nil {
		fit = a.memoryFit(req, req.HugePagesNow)
	}
	if fit.AnyNodes() {
		// Every node holds it alone: rule 0 rules nothing out, and the
		// first node of its CPUs' mems holds all of it, as split would
		// find, without working out their order.
		cpus, reserved, err := a.placeExclusive(req)
		return placed{cpus: cpus, reserved: reserved, onFirst: true}, err
	}
	a.fit, a.planNodes = fit, a.planNodes[:0]
	defer func() { a.fit = nil }()
	cpus, reserved, err := a.placeExclusive(req)
	if err != nil {
		return placed{}, err
	}
	return a.withMemory(req, fit, placed{cpus: cpus, reserved: reserved, warning: fit.Warning()}, a.planNodes)
}

// withMemory splits a placement's memory over its nodes, its CPUs' first.
func (a *Allocator) withMemory(req Request, fit *numamem.Fit, pl placed, planNodes []int) (placed, error) {
	pl.memory = fit.Split(a.splitOrder(pl.cpus, planNodes))
	if err := fit.Covered(pl.memory); err != nil {
		return placed{}, fmt.Errorf("container %s: %w", req.Pod.ContainerName(req.Container), err)
	}
	return pl, nil
}

// memoryOnExact counts the memory of a container whose CPUs the kubelet
// chose: it takes its memory from the nodes of those CPUs, and is refused
// when their hugepages cannot hold it.
func (a *Allocator) memoryOnExact(req Request, cpus cpuset.CPUSet) ([]numamem.NodeMemory, string, error) {
	if !a.countsMemory(req) {
		return nil, "", nil
	}
	fit := a.memoryFit(req, req.HugePagesNow)
	nodes := a.memNodesOf(a.x.numaNodes(cpus))
	warning := ""
	if !fit.Fits(nodes) {
		msg, hugePages := fit.Shortage(nodes)
		if hugePages {
			return nil, "", fmt.Errorf("pool %s cannot fit container %s on the CPUs %s the kubelet allocated: %s; reserve hugepages on those NUMA nodes, or align the CPUs with the hugepages with the kubelet's Topology Manager", req.Pool, req.Pod.ContainerName(req.Container), cpus, msg)
		}
		fit.IgnoreMemory()
		warning = fmt.Sprintf("container %s: %s; placed on the CPUs the kubelet allocated anyway (a memory limit is a ceiling, not a reservation)", req.Pod.ContainerName(req.Container), msg)
	}
	return fit.Split(nodes), warning, nil
}

// onFirstNode is a demand held on the lowest node of mems: split's answer
// when that node holds all of it.
func (a *Allocator) onFirstNode(d numamem.Demand, mems cpuset.CPUSet) []numamem.NodeMemory {
	for _, n := range a.x.nodes {
		if mems.Contains(n) {
			return numamem.OnNode(d, n)
		}
	}
	return nil
}
