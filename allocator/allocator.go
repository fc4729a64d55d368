// Package allocator decides where containers run: which pool, which CPUs
// and which memory nodes. It is pure — topology, configuration and the
// current assignments in, decisions out — and never touches the node, so
// the plugin, the simulator and the tests all run the same code.
//
// A file per concern, in layers: a file uses names of files of its own
// layer or of the layers below, never of a layer above, and no two files
// use each other. Each file's layer has one home, the table of
// docs/architecture.md, "The allocator's files", which also says what each
// file decides; layers_test.go reads it and holds the files to it.
package allocator

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// PodRef identifies a container's pod.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// ContainerName names a container of the pod for people, in logs and
// errors: "namespace/pod/container".
func (p PodRef) ContainerName(container string) string {
	return p.Namespace + "/" + p.Name + "/" + container
}

// Assignment is where one container runs.
type Assignment struct {
	ID        string `json:"id"`
	Pod       PodRef `json:"pod"`
	Container string `json:"container"`
	Pool      string `json:"pool"`
	// MilliCPU is the CPU request the exclusive size was derived from.
	MilliCPU int64 `json:"milliCPU"`
	// CPUs is the container's cpuset; Reserved are further CPUs held idle
	// for it (hidden hyperthread siblings).
	CPUs     cpuset.CPUSet `json:"-"`
	Reserved cpuset.CPUSet `json:"-"`
	Mems     cpuset.CPUSet `json:"-"`
	// NoCPUQuota tells that the container's CFS quota is lifted: it has
	// exclusive CPUs and disableCPUQuota applies to it.
	NoCPUQuota bool `json:"-"`
	// IsolateIRQs tells that device IRQs are kept off its CPUs (and its
	// reserved siblings) while it holds them.
	IsolateIRQs bool `json:"-"`
	// IsolatedPartition tells that its cgroup is made an isolated cgroup
	// v2 partition of its CPUs while it runs.
	IsolatedPartition bool `json:"-"`
	// PowerClass is the power class of an exclusive container's CPUs ("":
	// as the node has them), also while they are held for its pod.
	PowerClass string `json:"-"`
	// WithShared tells that an exclusive container also runs on the
	// shared pool, whose CPUs are Shared (as of its last update): its
	// cpuset is Cpuset(), its CPUs stay the exclusive part.
	WithShared bool          `json:"-"`
	Shared     cpuset.CPUSet `json:"-"`
	// HideHyperthreads tells that the container asked for its cores'
	// other threads idle (hide-hyperthreads) and got them: Reserved are
	// those siblings. Recorded because a core whose sibling was offline
	// counts as whole, so Reserved alone cannot tell; a sibling that
	// comes online later joins Reserved (Rebase).
	HideHyperthreads bool `json:"-"`
	// Added are the CPUs in-place resizes added to the container, in the
	// order they were added; the rest of CPUs is its original set, which a
	// resize never gives back.
	Added []int `json:"-"`
	// Memory is what it holds of each NUMA node's memory (numamem): set
	// for exclusive containers whose mems are pinned, also while they are
	// held for its pod.
	Memory []numamem.NodeMemory `json:"-"`
	// Rule is what decided its pool and CPUs (rule.go), for explain.
	Rule Rule `json:"-"`
}

// Original returns the CPUs the container was created with.
func (a *Assignment) Original() cpuset.CPUSet { return a.CPUs.Difference(cpuset.New(a.Added...)) }

// restartKey identifies a container across restarts: same pod, same name.
func (a *Assignment) restartKey() string { return a.Pod.UID + "/" + a.Container }

// Held returns every CPU the assignment keeps from others.
//
// Sets are never modified in place, so without reserved CPUs (the common
// case) it is the CPUs themselves, not a copy.
func (a *Assignment) Held() cpuset.CPUSet {
	if a.Reserved.IsEmpty() {
		return a.CPUs
	}
	return a.CPUs.Union(a.Reserved)
}

// inHeld tells whether cpu is one of Held's, without building the union.
func (a *Assignment) inHeld(cpu int) bool { return a.CPUs.Contains(cpu) || a.Reserved.Contains(cpu) }

// Allocator tracks every container's assignment and makes new ones. It is
// not safe for concurrent use; the plugin serializes calls with its lock.
type Allocator struct {
	x          *index
	layout     *Layout
	pinMemory  bool
	views      map[string]*poolView // exclusive pools only
	containers map[string]*Assignment
	// inPool counts the containers of each pool, kept by addContainer and
	// removeContainer, so that Usage, which the state writer takes under
	// the plugin's lock at every write, does not walk every container.
	inPool map[string]int
	// exclusive are the containers of the exclusive pools, by id: at most
	// about one per CPU however many run, so that the background passes'
	// questions about held CPUs (HeldCPUs) walk them, not every container.
	exclusive map[string]*Assignment
	// byPod indexes containers by pod UID, so that a pod's release
	// visits its own containers, not the node's (see addContainer).
	byPod map[string]map[string]bool
	// owner[cpu] is the container holding the CPU exclusively, "" if none;
	// set only through setOwner.
	owner []string
	// busy[cpu] is owner[cpu] != "": what placement's walk over every
	// core reads, 1 byte a CPU where owner takes 16 (see index.view).
	busy []bool
	// members lists each pool's static CPUs and inInfra marks infra's, so
	// that pool figures are counted without building sets (see usage.go).
	members map[string][]int
	inInfra []bool
	// holds keep stopped exclusive containers' CPUs for their pods, by
	// restartKey; their CPUs stay owned by the stopped container's id.
	holds map[string]*Hold
	// overlapped is set once keep (recover.go) put two containers on one
	// CPU; only then must a release look for another holder.
	overlapped bool
	// scratch is placement's working memory (see placement.go).
	scratch scratch
	// infraGen counts the owner changes of infra's CPUs, the only thing
	// infra's cpuset depends on; infraCPUs is that cpuset as of
	// infraCPUsGen, so that a decision that leaves infra alone (most)
	// neither builds it nor compares it (see markInfra).
	infraGen, infraCPUsGen uint64
	infraCPUs              *cpuset.CPUSet
	// sharedGen counts the owner changes of the shared pool's CPUs (only
	// an exclusive container kept where it runs after a config change
	// owns one), after which its users follow the pool (followInfra);
	// inShared marks the pool's CPUs.
	sharedGen uint64
	inShared  []bool
	// mem counts the memory of NUMA nodes held by containers, holds and
	// DRA claims (numamem; the allocator's side: memory.go).
	mem numamem.Account
	// planNodes are the NUMA nodes of the last plan placement built: the
	// nodes a container's memory may come from.
	planNodes []int
	// fit is the memory of the decision being made, nil when its memory
	// is not counted (memplace.go).
	fit *numamem.Fit
	// liveNodes and liveSizes are what a decision hands its hugepage
	// reader (hugelive.go), kept between decisions.
	liveNodes []int
	liveSizes []int64
	// fitBuf is the figures a decision's fit is worked out in, kept
	// between decisions (memoryFit).
	fitBuf numamem.Fit
	// cores are the node's cores with their offline threads
	// (hiddensiblings.go).
	cores presentCores
}

// Layout returns the static pool layout.
func (a *Allocator) Layout() *Layout { return a.layout }

// Topology returns the topology the allocator was built for.
func (a *Allocator) Topology() *sysfs.Topology { return a.x.topo }

// Result is a decision and the containers it moves as a side effect.
type Result struct {
	Assignment Assignment
	// Updates are other containers whose cpuset changed (members of a
	// pool that grew or shrank).
	Updates []Assignment
	// InfraChanged tells that the infra pool changed, so pod sandboxes
	// must follow.
	InfraChanged bool
	// Warning is what the operator should know of a placement that was
	// made nonetheless (a memory limit no set of NUMA nodes holds).
	Warning string
}

// Request asks for a container's placement.
type Request struct {
	ID        string
	Pod       PodRef
	Container string
	Pool      string
	MilliCPU  int64
	Options   config.Allocation
	// NUMANodes, when not empty, restricts exclusive CPUs to these nodes.
	NUMANodes cpuset.CPUSet
	// PreferNUMA are nodes to prefer (the nodes of the container's devices).
	PreferNUMA cpuset.CPUSet
	// CPUs, when not empty, are the exact exclusive CPUs the kubelet
	// allocated (the cpupool.dev/exclusive resource); they are checked, not
	// chosen.
	CPUs cpuset.CPUSet
	// IsolateIRQs keeps device IRQs off an exclusive container's CPUs.
	IsolateIRQs bool
	// IsolatedPartition makes its cgroup an isolated partition.
	IsolatedPartition bool
	// PowerClass is an exclusive container's power class.
	PowerClass string
	// WithShared adds the shared pool to an exclusive container's cpuset.
	WithShared bool
	// PartitionSkipped tells that its pool would have made its cgroup an
	// isolated partition (isolatedPartition: optOut), and does not because
	// it runs on the shared pool too (see partitionOrShared).
	PartitionSkipped bool
	// NotAllowed names the pool guaranteedExclusive would have given the
	// container, had allowedNamespaces of that pool listed its namespace:
	// it went to the default pool instead (Policy.defaultPool), which the
	// plugin tells the pod. "" for every other container.
	NotAllowed string
	// Demand is what the container asks of memory (numamem); counted
	// for exclusive containers whose mems are pinned.
	Demand numamem.Demand
	// Rule is what decided the pool (rule.go), for the assignment.
	Rule Rule
	// HugePagesNow are the nodes' hugepage counts read for this decision,
	// by node id; nil uses those last read. The caller reads them only
	// for a container that asks for hugepages.
	HugePagesNow map[int][]sysfs.HugePages
	// ReadHugePages, when HugePagesNow is nil, reads the counts of the
	// nodes the decision needs, no more (hugelive.go).
	ReadHugePages HugePageReader
	// grow is the running container a resize adds CPUs to.
	grow *Assignment
	// running tells that the container runs already (Synchronize places
	// it anew, Adopt): the hugepages it touched are missing from
	// free_hugepages because they are its own, so the free count is no
	// floor for it (runningFit).
	running bool
	// onlyWhereItRuns makes Adopt add the container only if it
	// StaysWhereItRuns (AdoptWhereItRuns).
	onlyWhereItRuns bool
}

// infraMark is infra as it was before an operation, to tell whether the
// operation changed it, and the shared pool's owner changes by then.
type infraMark struct {
	gen       uint64
	cpus      cpuset.CPUSet
	sharedGen uint64
}

// markInfra remembers infra now; it costs nothing while infra is as it was
// at the last mark.
func (a *Allocator) markInfra() infraMark {
	return infraMark{gen: a.infraGen, cpus: a.PoolCPUs(pools.Infra), sharedGen: a.sharedGen}
}

// followInfra moves infra members to the current infra cpuset if it
// changed since before, and the shared pool's users (its members, and
// the shared part of exclusive containers that asked for it) to where
// they run now (MembersCPUs) if infra or the shared pool changed: while
// the shared pool has no free CPU (every one offline, or held by
// exclusive containers kept where they run after a config change) they
// run on infra and follow it; once one is free (such a container ended)
// they go back to it, and no longer follow infra, which may then lend the
// CPUs they ran on to an exclusive-non-isolcpus container. It tells
// whether infra changed.
func (a *Allocator) followInfra(before infraMark) ([]Assignment, bool) {
	sharedChanged := a.sharedGen != before.sharedGen
	infraChanged := a.infraGen != before.gen
	if !sharedChanged && !infraChanged {
		return nil, false // no owner of an infra or shared CPU changed
	}
	now := a.PoolCPUs(pools.Infra)
	if cpulist.Equal(now, before.cpus) {
		// Changed and changed back (a CPU lent and returned).
		if infraChanged = false; !sharedChanged {
			return nil, false
		}
	}
	// Infra's members run on the shared pool while infra has no free CPU
	// (MembersCPUs), never on an empty set.
	infra, shared := a.MembersCPUs(pools.Infra), a.MembersCPUs(pools.Shared)
	var updates []Assignment
	for _, id := range a.sortedIDs() {
		c := a.containers[id]
		switch {
		case c.Pool == pools.Infra && infraChanged:
			if infra.IsEmpty() || cpulist.Equal(c.CPUs, infra) {
				continue
			}
			c.CPUs = infra
			c.Mems = a.memsFor(infra)
		case !a.followShared(c, shared):
			continue
		}
		updates = append(updates, *c)
	}
	return updates, infraChanged
}

// followShared moves one container's shared CPUs (a member's, or an
// exclusive container's shared part, less its own exclusive CPUs) to now,
// where the shared pool's users run; it tells whether they moved. Nothing
// moves to an empty set.
func (a *Allocator) followShared(c *Assignment, now cpuset.CPUSet) bool {
	switch {
	case c.Pool == pools.Shared && !now.IsEmpty() && !cpulist.Equal(c.CPUs, now):
		c.CPUs, c.Mems = now, a.memsFor(now)
		return true
	case c.WithShared && pools.IsExclusive(c.Pool):
		part := now.Difference(c.Held())
		if part.IsEmpty() || cpulist.Equal(c.Shared, part) {
			return false
		}
		c.Shared = part
		return true
	}
	return false
}

// otherHolder finds an exclusive container other than the one letting cpu
// go (except) that still runs on it, or a hold that keeps it, after keep
// (recover.go) made two overlap, so the CPU is not handed out while in
// use. The one letting go is skipped because it may still be listed as it
// does (free runs before the container is forgotten; a hold lets an idle
// sibling go before it drops it): found, it would get the CPU back under
// an id about to go, and the CPU would never be free again.
func (a *Allocator) otherHolder(cpu int, except string) string {
	for _, id := range a.sortedIDs() {
		c := a.containers[id]
		if id != except && pools.IsExclusive(c.Pool) && c.Held().Contains(cpu) {
			return id
		}
	}
	for _, key := range a.sortedHoldKeys() {
		if h := a.holds[key]; h.ID != except && h.Held().Contains(cpu) {
			return h.ID
		}
	}
	return ""
}

// PoolCPUs returns a pool's current cpuset. Shared and infra pools leave
// out CPUs an exclusive container holds: infra shrinks while
// exclusive-non-isolcpus containers borrow from it, and a container kept
// where it runs after a config change keeps its CPUs to itself.
func (a *Allocator) PoolCPUs(pool string) cpuset.CPUSet {
	cpus := a.layout.Pool(pool)
	if pools.IsExclusive(pool) {
		return cpus
	}
	if pool == pools.Infra {
		if a.infraCPUs == nil || a.infraCPUsGen != a.infraGen {
			now := a.poolLessHeld(cpus)
			a.infraCPUs, a.infraCPUsGen = &now, a.infraGen
		}
		return *a.infraCPUs
	}
	return a.poolLessHeld(cpus)
}

// MembersCPUs is where the members of pool shared or infra run now: the
// pool's CPUs (PoolCPUs), or while it has none (every CPU of it went
// offline), the other pool's, and the shared part of exclusive containers
// that asked for it with them. Left on their offline CPUs they would run
// where the kernel puts them: on their parent cgroup's CPUs (v2 falls back
// to the parent's effective CPUs, v1 moves the tasks to the parent
// cpuset), exclusive ones included. They move back when a CPU of their
// pool comes online (Rebase). Empty only when both pools are.
func (a *Allocator) MembersCPUs(pool string) cpuset.CPUSet {
	if cpus := a.PoolCPUs(pool); !cpus.IsEmpty() {
		return cpus
	}
	return a.PoolCPUs(otherMembersPool(pool))
}

// membersWhileEmpty is where a member of pool shared or infra is placed
// when PoolCPUs(pool) is empty: MembersCPUs, the other pool, while the
// config gives the pool CPUs but none of them is free now: every one is
// offline (they join it when they come online), or held by an exclusive
// container kept where it runs after a config change (it is the pool's
// again when that container ends). Left on CPUs outside their pool, its
// users would share CPUs another pool hands out, exclusive ones included.
// Nothing when the config gives the pool no CPU: a new member cannot
// follow it and is told so (a running one still leaves for the other
// pool, see readd). Infra is never empty by the config (the layout
// refuses it).
func (a *Allocator) membersWhileEmpty(pool string) cpuset.CPUSet {
	if a.layout.Pool(pool).IsEmpty() && !a.allOffline(pool) {
		return cpuset.New()
	}
	return a.MembersCPUs(pool)
}

// allOffline tells whether pool shared or infra has no online CPU only
// because every CPU the config gives it is offline.
func (a *Allocator) allOffline(pool string) bool {
	return a.layout.Pool(pool).IsEmpty() && (pool == pools.Infra || pool == pools.Shared && !a.layout.SharedCarved.IsEmpty())
}

// noMembersCPUs says why a member of pool shared or infra cannot be
// placed: the config gives the pool no CPU, or every CPU of it (and of
// the other pool) is offline, which no config change fixes.
func (a *Allocator) noMembersCPUs(pool string) error {
	if a.allOffline(pool) {
		return fmt.Errorf("every CPU of pool %s is offline, and so is every CPU of pool %s, where its members run meanwhile; it can start once one comes back online", pool, otherMembersPool(pool))
	}
	return fmt.Errorf("pool %s has no CPUs on this node; configure pools.%s or choose another pool", pool, pool)
}

// otherMembersPool is the pool the members of pool shared or infra run on
// while every CPU of theirs is offline (MembersCPUs).
func otherMembersPool(pool string) string {
	if pool == pools.Infra {
		return pools.Shared
	}
	return pools.Infra
}

// poolLessHeld is cpus without those an exclusive container holds.
func (a *Allocator) poolLessHeld(cpus cpuset.CPUSet) cpuset.CPUSet {
	var held []int
	for _, id := range cpus.UnsortedList() {
		if a.owner[id] != "" {
			held = append(held, id)
		}
	}
	if len(held) == 0 {
		return cpus
	}
	return cpus.Difference(cpuset.New(held...))
}

// FreeCPUs returns the CPUs of an exclusive pool that nobody holds.
func (a *Allocator) FreeCPUs(pool string) cpuset.CPUSet {
	var free []int
	for _, id := range a.layout.Pool(pool).UnsortedList() {
		if a.owner[id] == "" {
			free = append(free, id)
		}
	}
	return cpuset.New(free...)
}

// Get returns a container's assignment.
func (a *Allocator) Get(id string) (Assignment, bool) {
	c, ok := a.containers[id]
	if !ok {
		return Assignment{}, false
	}
	return *c, true
}

// Assignments returns every container's assignment, sorted by id.
func (a *Allocator) Assignments() []Assignment {
	out := make([]Assignment, 0, len(a.containers))
	for _, id := range a.sortedIDs() {
		out = append(out, *a.containers[id])
	}
	return out
}

// PodsWithoutCPUQuota are the pods, by UID, of which a container has its
// CFS quota lifted (NoCPUQuota). Unlike Assignments it neither sorts nor
// copies: the sandbox pinner asks under the plugin's lock.
func (a *Allocator) PodsWithoutCPUQuota() map[string]bool {
	pods := map[string]bool{}
	for _, c := range a.containers {
		if c.NoCPUQuota && c.Pod.UID != "" {
			pods[c.Pod.UID] = true
		}
	}
	return pods
}

// Absent returns the CPUs of a set that this node does not have at all
// (not present: a state file from another node, a vCPU unplugged). An
// offline CPU is not absent: the kernel may take a container's CPU offline
// and bring it back, and its record keeps it meanwhile.
func (a *Allocator) Absent(cpus cpuset.CPUSet) cpuset.CPUSet {
	var out []int
	for _, id := range cpus.UnsortedList() {
		if !a.x.present(id) {
			out = append(out, id)
		}
	}
	return cpuset.New(out...)
}

func (a *Allocator) sortedIDs() []string { return slices.Sorted(maps.Keys(a.containers)) }

// memsOf is an assignment's mems: the nodes nearest its CPUs, and the
// nodes it holds memory of, which may lie beyond them (rule 0). Every
// place that recomputes an assignment's mems goes through it, so that a
// change of CPUs (a resize, a hold giving CPUs away) never drops a node
// whose hugepages it holds.
func (a *Allocator) memsOf(as *Assignment) cpuset.CPUSet {
	mems := a.memsFor(as.CPUs)
	for _, nm := range as.Memory {
		if !mems.Contains(nm.Node) {
			// Only then: a union costs a decision two allocations, and
			// most containers' memory is on the nodes of their CPUs.
			return mems.Union(numamem.NodeSet(as.Memory))
		}
	}
	return mems
}

func (a *Allocator) memsFor(cpus cpuset.CPUSet) cpuset.CPUSet {
	if !a.pinMemory {
		return cpuset.New()
	}
	return a.x.memsFor(cpus)
}

// setOwner records the container holding a CPU exclusively ("" for none).
func (a *Allocator) setOwner(cpu int, id string) {
	if cpu < len(a.inInfra) && a.inInfra[cpu] && (a.owner[cpu] == "") != (id == "") {
		a.infraGen++
	}
	if cpu < len(a.inShared) && a.inShared[cpu] && (a.owner[cpu] == "") != (id == "") {
		a.sharedGen++
	}
	a.owner[cpu] = id
	a.busy[cpu] = id != ""
}

// addContainer records an assignment, indexed by id and by pod.
func (a *Allocator) addContainer(as *Assignment) {
	if old, ok := a.containers[as.ID]; ok {
		a.removeContainer(old.ID)
	}
	a.containers[as.ID] = as
	a.inPool[as.Pool]++
	if pools.IsExclusive(as.Pool) {
		a.exclusive[as.ID] = as
	}
	if a.byPod[as.Pod.UID] == nil {
		a.byPod[as.Pod.UID] = map[string]bool{}
	}
	a.byPod[as.Pod.UID][as.ID] = true
}

// removeContainer forgets an assignment.
func (a *Allocator) removeContainer(id string) {
	c, ok := a.containers[id]
	if !ok {
		return
	}
	delete(a.containers, id)
	if a.inPool[c.Pool]--; a.inPool[c.Pool] == 0 {
		delete(a.inPool, c.Pool)
	}
	delete(a.exclusive, id)
	delete(a.byPod[c.Pod.UID], id)
	if len(a.byPod[c.Pod.UID]) == 0 {
		delete(a.byPod, c.Pod.UID)
	}
}

// Hold keeps a stopped exclusive container's CPUs for its pod, as the
// kubelet's static CPU manager does for as long as the pod is active: the
// scheduler counted the pod's request on this node, so the container's next
// run (same pod UID, same name) must never find its CPUs taken. The pod's
// later containers may reuse them (the kubelet's init-container reuse). A
// hold ends when the pod's sandbox stops or is removed (ReleasePod) or when
// a new run of the same container is created.
type Hold struct {
	// Assignment is the stopped container's last assignment; its ID is the
	// stopped container's id and its CPUs and Reserved stay held.
	Assignment
	// ExitCode is what the runtime reported when the container stopped;
	// nil when it did not say (the container vanished while the plugin was
	// away, or the runtime does not report exit codes).
	ExitCode *int32 `json:"exitCode,omitempty"`
}

// Reusable tells whether the pod's other containers may take the held
// CPUs. A container that failed (non-zero exit) is being restarted, so its
// CPUs stay its own; one that completed is what an init container looks
// like to NRI, which does not say which containers are init containers.
func (h *Hold) Reusable() bool { return h.ExitCode == nil || *h.ExitCode == 0 }

// podHoldKeys returns the keys of a pod's holds, sorted. It is on the
// creation path: it sorts only the pod's keys.
func (a *Allocator) podHoldKeys(uid string) []string {
	if uid == "" || len(a.holds) == 0 {
		return nil
	}
	var keys []string
	for k, h := range a.holds {
		if h.Pod.UID == uid {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// free gives up the CPUs an exclusive assignment owns.
func (a *Allocator) free(c *Assignment) {
	if !pools.IsExclusive(c.Pool) {
		return
	}
	a.mem.Set(c.ID, nil)
	a.disown(c.ID, c.Held())
}

// disown gives up the CPUs of cpus that id owns: each is free again, or,
// once keep put two containers on one CPU (overlapped), owned by the
// other container or hold that has it, so that it is not handed out under
// them. One helper, because free and a hold that keeps fewer CPUs
// (takeFromHolds: its idle siblings of cores it no longer has) must let a
// CPU go by the same rule; a CPU id does not own (already another's) is
// left as it is.
func (a *Allocator) disown(id string, cpus cpuset.CPUSet) {
	for _, cpu := range cpus.UnsortedList() {
		if a.owner[cpu] == id {
			a.setOwner(cpu, "")
			if a.overlapped {
				a.setOwner(cpu, a.otherHolder(cpu, id))
			}
		}
	}
}

func (a *Allocator) sortedHoldKeys() []string { return slices.Sorted(maps.Keys(a.holds)) }

// Release forgets a container and frees its CPUs at once, with no hold
// (see Stop for a container that may run again).
func (a *Allocator) Release(id string) Result {
	c, ok := a.containers[id]
	if !ok {
		return Result{}
	}
	infraBefore := a.markInfra()
	a.removeContainer(id)
	a.free(c)
	res := Result{Assignment: *c}
	res.Updates, res.InfraChanged = a.followInfra(infraBefore)
	return res
}

// HugePageReader reads the hugepage counts of the sizes given on the nodes
// given, now; nil when the read failed (the decision then uses the counts
// last read, and the reader says why). It must not keep the slices it is
// given: they are the allocator's buffers.
type HugePageReader func(nodes []int, sizesKB []int64) map[int][]sysfs.HugePages

// offline are the CPUs an exclusive assignment keeps that are offline
// (present, so that they have an owner in the index); none for a shared
// or infra member, which follows its pool.
func (a *Allocator) offline(as *Assignment) cpuset.CPUSet {
	if !pools.IsExclusive(as.Pool) {
		return cpuset.New()
	}
	var off []int
	for _, cpu := range as.Held().UnsortedList() {
		if !a.x.online(cpu) {
			off = append(off, cpu)
		}
	}
	return cpuset.New(off...)
}
