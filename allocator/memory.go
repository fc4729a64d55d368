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
// holds, their sum by node, and the nodes' capacity as last read. The
// per-node figures are slices indexed by node id, not maps: a decision
// reads every node's, and NUMA node ids are small and dense.
type memAccount struct {
	// held is by container id (a hold keeps its stopped container's id):
	// setting a holder's memory replaces what it held, so nothing is ever
	// counted twice.
	held map[string][]NodeMemory
	// used is by node id; it grows for a holding that names a node the
	// topology lacks (a state file's), so that giving it back balances.
	used []nodeCount
	// pages are, by node id, the nodes' hugepage pools as last read: at
	// discovery, then at each decision that involves hugepages. A reading
	// replaces a node's only when it is no older (see keepPages).
	pages [][]sysfs.HugePages
}

// nodeUse is memory and hugepages by size, summed over some holdings:
// what a request may reuse (lentMemory, lendClaims) and what claims hold.
type nodeUse struct {
	memory int64
	pages  map[int64]int64 // by size in KiB
}

// nodeCount is one node's counts in the account: a short list of sizes,
// which a decision reads without hashing.
type nodeCount struct {
	memory int64
	pages  []Pages // by size, ascending; a count may fall back to 0
}

// held is the memory held on the node; nil holds none.
func (u *nodeCount) held() int64 {
	if u == nil {
		return 0
	}
	return u.memory
}

// heldPages is the pages held on the node by size; nil holds none.
func (u *nodeCount) heldPages() []Pages {
	if u == nil {
		return nil
	}
	return u.pages
}

// count is the pages of a size held on the node; nil holds none.
func (u *nodeCount) count(sizeKB int64) int64 {
	if u == nil {
		return 0
	}
	for _, p := range u.pages {
		if p.SizeKB == sizeKB {
			return p.Count
		}
	}
	return 0
}

// addCount adds n pages of a size, in place: the list is the account's own.
func (u *nodeCount) addCount(sizeKB, n int64) {
	i, found := slices.BinarySearchFunc(u.pages, sizeKB, func(p Pages, s int64) int { return cmpInt64(p.SizeKB, s) })
	if found {
		u.pages[i].Count += n
		return
	}
	u.pages = slices.Insert(u.pages, i, Pages{SizeKB: sizeKB, Count: n})
}

func newMemAccount(topo *sysfs.Topology) memAccount {
	maxID := -1
	for _, n := range topo.NUMANodes {
		maxID = max(maxID, n.ID)
	}
	m := memAccount{held: map[string][]NodeMemory{}, used: make([]nodeCount, maxID+1), pages: make([][]sysfs.HugePages, maxID+1)}
	for _, n := range topo.NUMANodes {
		if n.ID >= 0 {
			// The account's own copy, which a reading updates in place.
			m.pages[n.ID] = slices.Clone(n.HugePages)
		}
	}
	return m
}

// use is the node's counts; nil for a node nobody ever held anything of.
func (m *memAccount) use(node int) *nodeCount {
	if node < 0 || node >= len(m.used) {
		return nil
	}
	return &m.used[node]
}

// pagesOf is the node's hugepage pools as last read.
func (m *memAccount) pagesOf(node int) []sysfs.HugePages {
	if node < 0 || node >= len(m.pages) {
		return nil
	}
	return m.pages[node]
}

// setMemory makes what holder id holds of the nodes' memory held; nil
// gives it all back.
func (a *Allocator) setMemory(id string, held []NodeMemory) {
	defer a.followClaims(id) // a claim's container takes from its reservation
	m := &a.mem
	// One map operation in the usual cases, a new holder or one giving
	// all back: they run in every decision and release.
	if old, ok := m.held[id]; ok {
		for _, nm := range old {
			m.add(nm, -1)
		}
		if len(held) == 0 {
			delete(m.held, id)
			return
		}
	}
	if len(held) == 0 {
		return
	}
	m.held[id] = held
	for _, nm := range held {
		m.add(nm, 1)
	}
}

func (m *memAccount) add(nm NodeMemory, sign int64) {
	if nm.Node < 0 {
		return // no node: never counted, so never given back either
	}
	if nm.Node >= len(m.used) {
		m.used = append(m.used, make([]nodeCount, nm.Node+1-len(m.used))...)
	}
	u := &m.used[nm.Node]
	u.memory += sign * nm.Memory
	for _, p := range nm.HugePages {
		u.addCount(p.SizeKB, sign*p.Count)
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
		u := a.mem.use(n)
		if u == nil {
			continue
		}
		nu := NodeMemoryUse{Node: n, Memory: u.memory, HugePages: map[int64]int64{}}
		for _, p := range u.pages {
			if p.Count != 0 {
				nu.HugePages[p.SizeKB] = p.Count
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

// keepPages keeps a node's hugepage reading, size by size, unless the one
// kept is newer: a creation reads the counts before it takes the plugin's
// lock, so a reading begun earlier may be handed over later, and must not
// replace the newer counts (the decision then uses those). A reading may
// hold only the sizes a decision asks for; the other sizes keep theirs.
func (m *memAccount) keepPages(node int, hp []sysfs.HugePages) {
	if node < 0 || node >= len(m.pages) {
		return // not a node of the topology: no decision reads it
	}
	for _, p := range hp {
		cur := m.pages[node] // the account's own (newMemAccount): updated in place
		i := 0               // a handful of sizes: a scan is quicker than a search
		for i < len(cur) && cur[i].SizeKB < p.SizeKB {
			i++
		}
		switch {
		case i == len(cur) || cur[i].SizeKB != p.SizeKB:
			m.pages[node] = slices.Insert(cur, i, p)
		case cur[i].Seq <= p.Seq:
			cur[i] = p
		}
	}
}

// memFit is what a request may have of each node's memory, worked out
// once per decision.
type memFit struct {
	demand Demand
	// memory is the memory available by node id; -1 for a node whose
	// MemTotal is unknown, or that has no memory: it holds any amount.
	memory []int64
	// pages is, by position in demand.HugePages, the pages of that size
	// available by node id.
	pages [][]int64
	// reserve is, by position in demand.HugePages, the host's reserve of
	// that size per node.
	reserve []int64
	// anyNodes tells that each NUMA node's memory alone holds the whole
	// demand: rule 0 then rules out no set of nodes, and the placement is
	// the one without memory (the common case: a memory limit on a node
	// with room), with none of the search's memory checks.
	anyNodes bool
	// ignoreMemory is set when no set of nodes holds the memory limit: the
	// request is then placed by the other rules, with a warning.
	ignoreMemory bool
	warning      string
	// lent is what the holds and claims the request may reuse hold, by
	// node (lentMemory, lendClaims).
	lent map[int]nodeUse
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
//
// The fit is the allocator's own, reused by the next decision: a decision
// makes one, and allocating its figures was a third of what memory added
// to it. For a container that runs already (req.running) free_hugepages is
// no floor, as in runningFit: every path that decides a running
// container's memory uses the same rule.
func (a *Allocator) memoryFit(req Request, now map[int][]sysfs.HugePages) *memFit {
	return a.fitFor(&a.fitBuf, req, now, req.running)
}

// runningFit is memoryFit for a container that runs already: the pages it
// touched are not free any more, but they are its own.
func (a *Allocator) runningFit(req Request) *memFit {
	return a.fitFor(new(memFit), req, nil, true)
}

func (a *Allocator) fitFor(f *memFit, req Request, now map[int][]sysfs.HugePages, running bool) *memFit {
	if len(now) > 0 {
		for _, node := range a.x.topo.NUMANodes { // lookups by id are quicker than ranging over the map
			if hp, ok := now[node.ID]; ok {
				a.mem.keepPages(node.ID, hp)
			}
		}
	}
	lent := a.lendClaims(req, a.lentMemory(req))
	ids := len(a.mem.pages)
	*f = memFit{demand: req.Demand, memory: fill(f.memory, ids, -1), pages: f.pages[:0], reserve: f.reserve, running: running}
	for range req.Demand.HugePages {
		i := len(f.pages)
		if i < cap(f.pages) {
			f.pages = f.pages[:i+1]
		} else {
			f.pages = append(f.pages, nil)
		}
		f.pages[i] = fill(f.pages[i], ids, 0)
	}
	f.reserve = f.reserve[:0]
	for _, want := range req.Demand.HugePages {
		f.reserve = append(f.reserve, a.layout.HugePagesReserve[want.SizeKB]) // once, not per node
	}
	f.lent = lent
	for i := range a.x.topo.NUMANodes {
		a.fitNode(f, &a.x.topo.NUMANodes[i])
	}
	f.anyNodes = a.eachNodeHolds(f)
	return f
}

// fitNode works out what a fit's request may have of one node, from the
// counts last read (again for the nodes whose counts a decision read
// after its placement: heldStillFits).
func (a *Allocator) fitNode(f *memFit, node *sysfs.NUMANode) {
	if !node.HasMemory || node.ID < 0 {
		return
	}
	u := a.mem.use(node.ID)
	l := f.lent[node.ID]
	hps := a.mem.pagesOf(node.ID)
	inPages := int64(0)
	for _, hp := range hps {
		inPages += hp.Total * hp.SizeKB * 1024
	}
	if node.MemTotalKB > 0 {
		f.memory[node.ID] = freeMemory(node.MemTotalKB*1024-inPages, a.layout.MemoryReserve, u.held()-l.memory)
	}
	for i, want := range f.demand.HugePages {
		var total, free int64
		for _, hp := range hps {
			if hp.SizeKB == want.SizeKB {
				total, free = hp.Total, hp.Free
			}
		}
		f.pages[i][node.ID] = freePages(total, free, f.reserve[i], u.count(want.SizeKB)-l.pages[want.SizeKB], f.running)
	}
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

// fill returns buf resized to n, every value v.
func fill(buf []int64, n int, v int64) []int64 {
	buf = slices.Grow(buf[:0], n)[:n]
	for i := range buf {
		buf[i] = v
	}
	return buf
}

// eachNodeHolds tells whether the memory serving each NUMA node holds the
// whole demand by itself: then every set of nodes does.
func (a *Allocator) eachNodeHolds(f *memFit) bool {
	for _, m := range a.x.memNode {
		if m == sysfs.Unknown {
			return false
		}
		for i, want := range f.demand.HugePages {
			if f.pagesAt(i, m) < want.Count {
				return false
			}
		}
		if avail := f.memoryAt(m); f.demand.Memory > 0 && avail >= 0 && avail < f.demand.Memory {
			return false
		}
	}
	return true
}

// memoryAt is the memory available on a node, -1 when it holds any amount.
func (f *memFit) memoryAt(n int) int64 {
	if n < 0 || n >= len(f.memory) {
		return -1
	}
	return f.memory[n]
}

// pagesAt is the pages of the demand's i-th size available on a node.
func (f *memFit) pagesAt(i, n int) int64 {
	if n < 0 || n >= len(f.pages[i]) {
		return 0
	}
	return f.pages[i][n]
}

// lentMemory is what the holds a request may reuse hold, by node: its own
// last run's (a new run ends it) and those of its pod's containers that
// completed, as their CPUs are (see reusableFor).
//
// A resize (req.grow) reuses no hold's memory: its growth takes CPUs of
// holds without their memory (takeFromHolds), and a hold's memory is only
// given to a new container that takes it.
func (a *Allocator) lentMemory(req Request) map[int]nodeUse {
	var out map[int]nodeUse // nil, which reads as nothing lent, for most
	if req.Pod.UID == "" || req.grow != nil {
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
	if f.anyNodes && len(memNodes) > 0 {
		return true
	}
	for i, want := range f.demand.HugePages {
		sum := int64(0)
		for _, n := range memNodes {
			sum += f.pagesAt(i, n)
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
		avail := f.memoryAt(n)
		if avail < 0 {
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
			take := min(left, f.pagesAt(i, n))
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
			avail := f.memoryAt(n)
			take := min(left, avail)
			if avail < 0 || j == len(order)-1 {
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
// The order is built in the allocator's scratch, valid until the next
// decision: split copies what it keeps.
func (a *Allocator) splitOrder(cpus cpuset.CPUSet, planNodes []int) []int {
	sc := &a.scratch
	local := a.memNodesInto(sc.memOrder, a.x.numaNodes(cpus))
	sc.memPlan = a.memNodesInto(sc.memPlan, planNodes)
	for _, n := range sc.memPlan {
		if !slices.Contains(local, n) {
			local = append(local, n)
		}
	}
	sc.memOrder = local
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
			sum += f.pagesAt(i, n)
			free = append(free, fmt.Sprintf("node%d %d", n, f.pagesAt(i, n)))
		}
		if sum < want.Count {
			hugePages = true
			parts = append(parts, fmt.Sprintf("hugepages-%s: asked %d, free %s", sysfs.HugePageSizeName(want.SizeKB), want.Count, strings.Join(free, " ")))
		}
	}
	if f.demand.Memory > 0 && !f.fitsMemory(memNodes) {
		free := make([]string, 0, len(memNodes))
		for _, n := range memNodes {
			free = append(free, fmt.Sprintf("node%d %s", n, Bytes(max(0, f.memoryAt(n)))))
		}
		parts = append(parts, fmt.Sprintf("memory: asked %s, free %s", Bytes(f.demand.Memory), strings.Join(free, " ")))
	}
	return strings.Join(parts, "; "), hugePages
}

// fitsMemory is fits for the memory limit alone.
func (f *memFit) fitsMemory(memNodes []int) bool {
	g := *f
	g.demand.HugePages, g.ignoreMemory, g.anyNodes = nil, false, false
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
		u := a.mem.use(node.ID)
		r.Held = u.held()
		sizes := map[int64]*PagesReport{}
		at := func(size int64) *PagesReport {
			if sizes[size] == nil {
				sizes[size] = &PagesReport{SizeKB: size}
			}
			return sizes[size]
		}
		inPages, lastFree := int64(0), map[int64]int64{}
		for _, hp := range a.mem.pagesOf(node.ID) {
			at(hp.SizeKB).Total = hp.Total
			lastFree[hp.SizeKB] = hp.Free
			inPages += hp.Total * hp.SizeKB * 1024
		}
		for size, n := range a.layout.HugePagesReserve {
			at(size).Reserved = n
		}
		for _, p := range u.heldPages() {
			if p.Count != 0 {
				at(p.SizeKB).Held = p.Count
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
