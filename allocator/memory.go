package allocator

// Memory follows the CPUs (docs/placement.md, "Memory follows the CPUs"):
// the hugepages and memory limits of the containers whose memory the
// allocator pins are counted per NUMA node, against each node's capacity
// less the host's reserve, and an exclusive container's CPUs go where its
// memory fits.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Demand is what a container asks of its NUMA nodes' memory: its memory
// limit and its hugepage limits, from its OCI spec. A container without a
// memory limit asks for no memory: the kernel bounds it by nothing we could
// count.
type Demand struct {
	// Memory is the memory limit in bytes; 0 asks for none.
	Memory int64
	// HugePages are the hugepages asked for, by size, ascending; every
	// count is positive.
	HugePages []Pages
}

// Pages is a number of hugepages of one size.
type Pages struct {
	SizeKB int64
	Count  int64
}

// IsZero tells that the demand asks for nothing.
func (d Demand) IsZero() bool { return d.Memory <= 0 && len(d.HugePages) == 0 }

// NodeMemory is what a container holds of one NUMA node's memory.
type NodeMemory struct {
	Node      int
	Memory    int64
	HugePages []Pages
}

// DemandOf is the demand that holdings add up to.
func DemandOf(held []NodeMemory) Demand {
	var d Demand
	for _, nm := range held {
		d.Memory += nm.Memory
		for _, p := range nm.HugePages {
			d.HugePages = addPages(d.HugePages, p.SizeKB, p.Count)
		}
	}
	return d
}

// Equal tells that two demands ask for the same.
func (d Demand) Equal(o Demand) bool {
	return max(d.Memory, 0) == max(o.Memory, 0) && slices.Equal(d.HugePages, o.HugePages)
}

// addPages adds n pages of a size to a list sorted by size.
func addPages(ps []Pages, sizeKB, n int64) []Pages {
	if n == 0 {
		return ps
	}
	i, found := slices.BinarySearchFunc(ps, sizeKB, func(p Pages, s int64) int { return cmpInt64(p.SizeKB, s) })
	if found {
		out := slices.Clone(ps)
		out[i].Count += n
		return out
	}
	return slices.Insert(slices.Clone(ps), i, Pages{SizeKB: sizeKB, Count: n})
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// memAccount is the per-node accounting: what each container and hold
// holds, their sum by node, and the nodes' capacity as last read.
type memAccount struct {
	// held is by container id (a hold keeps its stopped container's id):
	// setting a holder's memory replaces what it held, so nothing is ever
	// counted twice.
	held map[string][]NodeMemory
	used map[int]*nodeUse
	// pages are the nodes' hugepage pools as last read: at discovery,
	// then at each decision that involves hugepages. A reading replaces
	// a node's only when it is no older (see keepPages).
	pages map[int][]sysfs.HugePages
}

type nodeUse struct {
	memory int64
	pages  map[int64]int64 // by size in KiB
}

func newMemAccount(topo *sysfs.Topology) memAccount {
	m := memAccount{held: map[string][]NodeMemory{}, used: map[int]*nodeUse{}, pages: map[int][]sysfs.HugePages{}}
	for _, n := range topo.NUMANodes {
		m.pages[n.ID] = n.HugePages
	}
	return m
}

// setMemory makes what holder id holds of the nodes' memory held; nil
// gives it all back.
func (a *Allocator) setMemory(id string, held []NodeMemory) {
	defer a.followClaims(id) // a claim's container takes from its reservation
	m := &a.mem
	for _, nm := range m.held[id] {
		m.add(nm, -1)
	}
	delete(m.held, id)
	if len(held) == 0 {
		return
	}
	m.held[id] = held
	for _, nm := range held {
		m.add(nm, 1)
	}
}

func (m *memAccount) add(nm NodeMemory, sign int64) {
	u := m.used[nm.Node]
	if u == nil {
		u = &nodeUse{pages: map[int64]int64{}}
		m.used[nm.Node] = u
	}
	u.memory += sign * nm.Memory
	for _, p := range nm.HugePages {
		u.pages[p.SizeKB] += sign * p.Count
	}
}

// NodeMemoryUse is one node's memory figures, as the tests and status see
// them: what is held by the containers and holds the allocator counts.
type NodeMemoryUse struct {
	Node      int
	Memory    int64
	HugePages map[int64]int64
}

// MemoryUse returns what the counted containers and holds hold, by node in
// id order; nodes nobody holds anything of are left out.
func (a *Allocator) MemoryUse() []NodeMemoryUse {
	var out []NodeMemoryUse
	for _, n := range a.x.nodes {
		u := a.mem.used[n]
		if u == nil {
			continue
		}
		nu := NodeMemoryUse{Node: n, Memory: u.memory, HugePages: map[int64]int64{}}
		for size, c := range u.pages {
			if c != 0 {
				nu.HugePages[size] = c
			}
		}
		if nu.Memory != 0 || len(nu.HugePages) > 0 {
			out = append(out, nu)
		}
	}
	return out
}

// countsMemory tells whether the allocator counts a request's memory: an
// exclusive container whose mems it pins, asking for some.
func (a *Allocator) countsMemory(req Request) bool {
	return a.pinMemory && pools.IsExclusive(req.Pool) && req.grow == nil && !req.Demand.IsZero()
}

// keepPages keeps a node's hugepage reading unless the one kept is newer:
// a creation reads the counts before it takes the plugin's lock, so a
// reading begun earlier may be handed over later, and must not replace
// the newer counts (the decision then uses those).
func (m *memAccount) keepPages(node int, hp []sysfs.HugePages) {
	if readSeq(hp) >= readSeq(m.pages[node]) {
		m.pages[node] = hp
	}
}

// readSeq is the sequence number of a node's reading (0: discovery's).
func readSeq(hp []sysfs.HugePages) uint64 {
	var seq uint64
	for _, p := range hp {
		seq = max(seq, p.Seq)
	}
	return seq
}

// memFit is what a request may have of each node's memory, worked out
// once per decision.
type memFit struct {
	demand Demand
	// memory is the memory available by node; a node whose MemTotal is
	// unknown is absent and holds any amount.
	memory map[int]int64
	// pages is, by position in demand.HugePages, the pages of that size
	// available by node.
	pages []map[int]int64
	// ignoreMemory is set when no set of nodes holds the memory limit: the
	// request is then placed by the other rules, with a warning.
	ignoreMemory bool
	warning      string
	// running tells that the request's container runs already (counted at
	// a restart): its own pages are faulted in, so free_hugepages is no
	// floor, and split's last node takes the pages the others lack, as it
	// does the memory.
	running bool
}

// memoryFit works out the request's memory on every node, by the rule of
// docs/placement.md: a node's hugepages of a size available to it are
//
//	min(nr_hugepages − reserve − held, free_hugepages)
//
// where held are the pages our containers and holds hold there, less
// those of the holds the request may reuse (its own last run's, and the
// pod's completed containers'); its memory is MemTotal − the memory of its
// hugepage pools − reserve − held. now, when not nil, are the hugepage
// counts read for this decision.
func (a *Allocator) memoryFit(req Request, now map[int][]sysfs.HugePages) *memFit {
	return a.fitFor(req, now, false)
}

// runningFit is memoryFit for a container that runs already: the pages it
// touched are not free any more, but they are its own.
func (a *Allocator) runningFit(req Request) *memFit {
	return a.fitFor(req, nil, true)
}

func (a *Allocator) fitFor(req Request, now map[int][]sysfs.HugePages, running bool) *memFit {
	for n, hp := range now {
		a.mem.keepPages(n, hp)
	}
	lent := a.lendClaims(req, a.lentMemory(req))
	f := &memFit{demand: req.Demand, memory: map[int]int64{}, pages: make([]map[int]int64, len(req.Demand.HugePages)), running: running}
	for i := range f.pages {
		f.pages[i] = map[int]int64{}
	}
	memReserve, pageReserve := a.layout.MemoryReserve, a.layout.HugePagesReserve
	for _, node := range a.x.topo.NUMANodes {
		if !node.HasMemory {
			continue
		}
		u := a.mem.used[node.ID]
		if u == nil {
			u = &nodeUse{}
		}
		l := lent[node.ID]
		inPages := int64(0)
		for _, hp := range a.mem.pages[node.ID] {
			inPages += hp.Total * hp.SizeKB * 1024
		}
		if node.MemTotalKB > 0 {
			f.memory[node.ID] = freeMemory(node.MemTotalKB*1024-inPages, memReserve, u.memory-l.memory)
		}
		for i, want := range req.Demand.HugePages {
			var total, free int64
			for _, hp := range a.mem.pages[node.ID] {
				if hp.SizeKB == want.SizeKB {
					total, free = hp.Total, hp.Free
				}
			}
			f.pages[i][node.ID] = freePages(total, free, pageReserve[want.SizeKB], u.pages[want.SizeKB]-l.pages[want.SizeKB], running)
		}
	}
	return f
}

// freeMemory is the memory of a node a container may have: its capacity
// (MemTotal less its hugepage pools) less the host's reserve and what is
// held there. The decision and the report (status, metrics) both use it,
// so that what status calls free is what a container gets.
func freeMemory(capacity, reserve, held int64) int64 {
	return max(0, capacity-reserve-held)
}

// freePages is the pages of one size of a node a container may have:
// nr_hugepages less the host's reserve and what is held there, and no more
// than free_hugepages as last read (pages something we do not count took),
// except for a running container, whose own touched pages are not free.
func freePages(total, free, reserve, held int64, running bool) int64 {
	avail := total - reserve - held
	if !running {
		avail = min(avail, free)
	}
	return max(0, avail)
}

// lentMemory is what the holds a request may reuse hold, by node: its own
// last run's (a new run ends it) and those of its pod's containers that
// completed, as their CPUs are (see reusableFor).
func (a *Allocator) lentMemory(req Request) map[int]nodeUse {
	var out map[int]nodeUse // nil, which reads as nothing lent, for most
	if req.Pod.UID == "" {
		return out
	}
	for _, key := range a.podHoldKeys(req.Pod.UID) {
		h := a.holds[key]
		if h.Container != req.Container && !h.Reusable() {
			continue
		}
		for _, nm := range a.mem.held[h.ID] {
			if out == nil {
				out = map[int]nodeUse{}
			}
			u := out[nm.Node]
			if u.pages == nil {
				u.pages = map[int64]int64{}
			}
			u.memory += nm.Memory
			for _, p := range nm.HugePages {
				u.pages[p.SizeKB] += p.Count
			}
			out[nm.Node] = u
		}
	}
	return out
}

// memNodesOf returns the nodes whose memory serves the NUMA nodes given (a
// memory-less node's nearest node with memory), in id order.
func (a *Allocator) memNodesOf(nodes []int) []int {
	return a.memNodesInto(nil, nodes)
}

// memNodesInto is memNodesOf appended to out[:0], for callers with a
// buffer of their own (the planner's scratch: it is asked once per
// combination weighed).
func (a *Allocator) memNodesInto(out, nodes []int) []int {
	out = out[:0]
	for _, n := range nodes {
		pos, ok := a.x.nodePos[n]
		if !ok {
			continue
		}
		if m := a.x.memNode[pos]; m != sysfs.Unknown && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// fits tells whether the memory of the nodes can hold the request.
func (f *memFit) fits(memNodes []int) bool {
	for i, want := range f.demand.HugePages {
		sum := int64(0)
		for _, n := range memNodes {
			sum += f.pages[i][n]
		}
		if sum < want.Count {
			return false
		}
	}
	if f.ignoreMemory || f.demand.Memory <= 0 {
		return true
	}
	sum := int64(0)
	for _, n := range memNodes {
		avail, known := f.memory[n]
		if !known {
			return true
		}
		sum += avail
	}
	return sum >= f.demand.Memory
}

// split takes the request's memory from the nodes, in the order given
// (the nodes of its CPUs first), each up to what it has; the last node
// takes what is left of the memory limit when it is over-committed, and,
// for a running container, of its hugepages.
func (f *memFit) split(order []int) []NodeMemory {
	out := make([]NodeMemory, 0, len(order))
	at := func(n int) *NodeMemory {
		for i := range out {
			if out[i].Node == n {
				return &out[i]
			}
		}
		out = append(out, NodeMemory{Node: n})
		return &out[len(out)-1]
	}
	for i, want := range f.demand.HugePages {
		left := want.Count
		for j, n := range order {
			take := min(left, f.pages[i][n])
			if f.running && j == len(order)-1 {
				take = left
			}
			if take > 0 {
				nm := at(n)
				nm.HugePages = addPages(nm.HugePages, want.SizeKB, take)
				left -= take
			}
		}
	}
	if left := f.demand.Memory; left > 0 && len(order) > 0 {
		for j, n := range order {
			avail, known := f.memory[n]
			take := min(left, avail)
			if !known || j == len(order)-1 {
				take = left
			}
			if take > 0 {
				at(n).Memory += take
				left -= take
			}
		}
	}
	out = slices.DeleteFunc(out, func(nm NodeMemory) bool { return nm.Memory == 0 && len(nm.HugePages) == 0 })
	slices.SortFunc(out, func(x, y NodeMemory) int { return x.Node - y.Node })
	return out
}

// splitOrder orders the memory nodes a placement may take memory from: the
// nodes of its CPUs first, then the other nodes of its plan, in id order.
func (a *Allocator) splitOrder(cpus cpuset.CPUSet, planNodes []int) []int {
	local := a.memNodesOf(a.x.numaNodes(cpus))
	for _, n := range a.memNodesOf(planNodes) {
		if !slices.Contains(local, n) {
			local = append(local, n)
		}
	}
	return local
}

// shortage describes, per hugepage size the nodes cannot hold (and the
// memory, when it cannot), what was asked and what each node has:
// "hugepages-2Mi: asked 16, free node0 0 node1 0". hugePages tells that
// hugepages are short, which refuses the container.
func (f *memFit) shortage(memNodes []int) (msg string, hugePages bool) {
	var parts []string
	for i, want := range f.demand.HugePages {
		sum := int64(0)
		free := make([]string, 0, len(memNodes))
		for _, n := range memNodes {
			sum += f.pages[i][n]
			free = append(free, fmt.Sprintf("node%d %d", n, f.pages[i][n]))
		}
		if sum < want.Count {
			hugePages = true
			parts = append(parts, fmt.Sprintf("hugepages-%s: asked %d, free %s", sysfs.HugePageSizeName(want.SizeKB), want.Count, strings.Join(free, " ")))
		}
	}
	if f.demand.Memory > 0 && !f.fitsMemory(memNodes) {
		free := make([]string, 0, len(memNodes))
		for _, n := range memNodes {
			free = append(free, fmt.Sprintf("node%d %s", n, Bytes(f.memory[n])))
		}
		parts = append(parts, fmt.Sprintf("memory: asked %s, free %s", Bytes(f.demand.Memory), strings.Join(free, " ")))
	}
	return strings.Join(parts, "; "), hugePages
}

// fitsMemory is fits for the memory limit alone.
func (f *memFit) fitsMemory(memNodes []int) bool {
	g := *f
	g.demand.HugePages, g.ignoreMemory = nil, false
	return g.fits(memNodes)
}

// Bytes writes an amount of memory the Kubernetes way: "8Gi", "1536Mi",
// exact, in the largest binary unit that divides it.
func Bytes(b int64) string {
	return resource.NewQuantity(b, resource.BinarySI).String()
}

// NodeMemoryReport is one NUMA node's memory as the allocator counts it,
// for the metrics: what it has, what the host keeps and what the counted
// containers and holds hold.
type NodeMemoryReport struct {
	Node int
	// Capacity is the memory in bytes the memory limits are counted
	// against: MemTotal less the memory of the node's hugepage pools as
	// last read; -1 when MemTotal is unknown.
	Capacity int64
	// Reserved is memory.reservedPerNode in bytes, and Held the memory
	// limits counted on the node.
	Reserved, Held int64
	// Free is what a container whose memory is pinned may still have of
	// the node (the decision's rule, freeMemory); -1 with Capacity.
	Free int64
	// HugePages are by size, ascending: every size the node has, and
	// every size reserved or held there.
	HugePages []PagesReport
}

// PagesReport is one hugepage size of a node: Total is nr_hugepages as
// last read (never re-read for a report), Reserved the host's reserve,
// Held the pages counted for our containers and holds, and Free what a
// container may still have (the decision's rule, freePages, with
// free_hugepages as last read).
type PagesReport struct {
	SizeKB                      int64
	Total, Reserved, Held, Free int64
}

// MemoryReport reports every NUMA node with memory, in id order, from the
// counts last read: it reads no file.
func (a *Allocator) MemoryReport() []NodeMemoryReport {
	var out []NodeMemoryReport
	for _, node := range a.x.topo.NUMANodes {
		if !node.HasMemory {
			continue
		}
		r := NodeMemoryReport{Node: node.ID, Capacity: -1, Free: -1, Reserved: a.layout.MemoryReserve}
		u := a.mem.used[node.ID]
		if u == nil {
			u = &nodeUse{}
		}
		r.Held = u.memory
		sizes := map[int64]*PagesReport{}
		at := func(size int64) *PagesReport {
			if sizes[size] == nil {
				sizes[size] = &PagesReport{SizeKB: size}
			}
			return sizes[size]
		}
		inPages, lastFree := int64(0), map[int64]int64{}
		for _, hp := range a.mem.pages[node.ID] {
			at(hp.SizeKB).Total = hp.Total
			lastFree[hp.SizeKB] = hp.Free
			inPages += hp.Total * hp.SizeKB * 1024
		}
		for size, n := range a.layout.HugePagesReserve {
			at(size).Reserved = n
		}
		for size, n := range u.pages {
			if n != 0 {
				at(size).Held = n
			}
		}
		if node.MemTotalKB > 0 {
			r.Capacity = max(0, node.MemTotalKB*1024-inPages)
			r.Free = freeMemory(r.Capacity, r.Reserved, r.Held)
		}
		for _, size := range slices.Sorted(maps.Keys(sizes)) {
			p := sizes[size]
			p.Free = freePages(p.Total, lastFree[size], p.Reserved, p.Held, false)
			r.HugePages = append(r.HugePages, *p)
		}
		out = append(out, r)
	}
	return out
}
