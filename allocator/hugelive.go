package allocator

// Which hugepage counts a decision reads live (issue 31): pages are
// reserved and taken at run time by processes the plugin does not know, so
// a decision never trusts a count it did not read for itself; but reading
// every node's counts (two files per node and size) costs the reply more
// than the decision does on a machine of many nodes. So a request that
// hands over a reader (Request.ReadHugePages) rather than counts
// (Request.HugePagesNow) is decided thus:
//
//   - When the counts last read let every NUMA node hold its whole demand,
//     memory rules no node out (numamem's Fit.AnyNodes): the placement is the one
//     the CPU rules make. Only the nodes it then holds hugepages on are read
//     again; if they still hold them, that placement is the one a decision
//     on every node's live counts makes (the set it chose is the best of all
//     sets, and it fits, so it is the best of those that fit). If they do
//     not, every node is read and the request decided again.
//   - Otherwise (some node is short, by the counts last read) every node is
//     read before the decision, as the search needs them all.
//   - A container whose CPUs are given (the kubelet's) reads the nodes of
//     those CPUs only.
//
// Either way the nodes a container is pinned to were read for its decision,
// and the live free_hugepages is a floor there.

import (
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// liveCounts settles what a request reads before its placement: it reads
// them into req.HugePagesNow where the placement needs them. When the
// placement must be checked against the counts of its own nodes afterwards
// (heldStillFits), it returns the fit worked out on the counts last read,
// which the placement uses as it is.
func (a *Allocator) liveCounts(req *Request) (cached *numamem.Fit) {
	if req.ReadHugePages == nil || req.HugePagesNow != nil || len(req.Demand.HugePages) == 0 || !a.countsMemory(*req) {
		return nil
	}
	read := req.ReadHugePages
	req.ReadHugePages = nil // read once: here, or in heldStillFits and perhaps rereadAll
	if req.CPUs.Size() > 0 {
		req.HugePagesNow = a.readOrEmpty(read, a.memNodesOf(a.x.numaNodes(req.CPUs)), req.Demand)
		return nil
	}
	if fit := a.memoryFit(*req, nil); fit.AnyNodes() {
		req.ReadHugePages = read
		return fit
	}
	req.HugePagesNow = a.readOrEmpty(read, a.mem.MemoryNodes(), req.Demand)
	return nil
}

// heldStillFits reads the counts of the nodes a placement holds hugepages
// on, and tells whether they still hold what it holds there (its memory
// too: a grown hugepage pool shrinks the node's memory). fit is the one the
// placement was made on; it is worked out again for those nodes.
func (a *Allocator) heldStillFits(req Request, fit *numamem.Fit, held []numamem.NodeMemory) bool {
	nodes := a.liveNodes[:0]
	for _, nm := range held {
		if len(nm.HugePages) > 0 {
			nodes = append(nodes, nm.Node)
		}
	}
	a.liveNodes = nodes
	now := req.ReadHugePages(nodes, a.demandSizes(req.Demand))
	if now == nil {
		return true // unread: decided on the counts last read, as any decision whose read fails
	}
	for _, n := range nodes {
		a.mem.KeepPages(n, now[n])
	}
	a.mem.Refit(fit, nodes)
	return fit.StillHolds(held)
}

// rereadAll is a request that failed heldStillFits, with every node's
// counts read now.
func (a *Allocator) rereadAll(req Request) Request {
	req.HugePagesNow = a.readOrEmpty(req.ReadHugePages, a.mem.MemoryNodes(), req.Demand)
	req.ReadHugePages = nil
	return req
}

// readOrEmpty reads the counts of nodes; a failed read is an empty
// reading, which decides on the counts last read and is not read again.
func (a *Allocator) readOrEmpty(read HugePageReader, nodes []int, d numamem.Demand) map[int][]sysfs.HugePages {
	if now := read(nodes, a.demandSizes(d)); now != nil {
		return now
	}
	return map[int][]sysfs.HugePages{}
}

// demandSizes are the hugepage sizes a demand asks for, in kB, in a buffer
// kept between decisions (a reader must not keep it).
func (a *Allocator) demandSizes(d numamem.Demand) []int64 {
	sizes := a.liveSizes[:0]
	for _, hp := range d.HugePages {
		sizes = append(sizes, hp.SizeKB)
	}
	a.liveSizes = sizes
	return sizes
}
