package plugin

// Synchronize: how the remembered state meets the runtime's after a
// (re)connect.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
)

// Synchronize reconciles the remembered state with the runtime, which is the
// truth about which containers exist and where they run: containers that
// still exist keep exactly their CPUs, vanished ones are freed, and ones
// created while the plugin was away are placed and updated.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, containers []*api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit.begun.Load() {
		// A connection Run gave up on the way out: like its Configure,
		// its Synchronize must not load, place, pin or write state beside
		// the way out's last write or after Close. Under the lock, which
		// those take too.
		return nil, fmt.Errorf("synchronizing with the runtime: %w", errStopping)
	}
	p.saidDamage = nil // what this reconciliation reads is said once, again
	if err := p.loadState(); err != nil {
		return nil, err
	}
	if p.synced {
		// The runtime reconnected: memory is newer than the file, and the
		// holds live in the allocator.
		p.rememberHolds()
	}
	remembered := p.memory
	p.startOver(pods)
	p.keepRefusals(remembered.Refusals, pods)
	podUIDs := map[string]bool{}
	for _, pod := range pods {
		podUIDs[pod.GetUid()] = true
	}
	p.keepAbsentGrants(podUIDs)
	// Remembered containers first, so that they keep their CPUs before
	// anything new is placed; those that hold CPUs of the shared pool
	// first of all (readmitOrder).
	known, unknown := splitRemembered(containers, remembered.Containers)
	var repair []*api.Container
	for _, c := range p.readmitOrder(known, remembered.Containers) {
		if !p.restoreKnown(c, remembered.Containers[c.GetId()]) {
			repair = append(repair, c)
		}
	}
	// Then those the runtime runs on a set of another size, with the
	// request of an in-place resize whose record a kill lost: after every
	// container whose record and runtime agree, before any hold.
	repair, refused := p.keepResized(repair, remembered.Containers, pods)
	// The DRA claims of the remembered containers are theirs again before
	// any other container is placed: it could show a copy of their tokens.
	p.rebindClaims(known, pods)
	// Containers the state does not know that the runtime runs pinned on
	// a set they may keep keep it before any hold is restored or any
	// remembered container is pinned again: a hold (a memory), a repin
	// onto remembered CPUs (a record a kill left stale) or a placement
	// anew must not take the CPUs a running container runs on, and move
	// it (RestoreHold refuses CPUs a running container has).
	rest := p.adoptWhereTheyRun(unknown, pods)
	// Then the holds of pods that still exist, before anything new is
	// placed: a container restarted while the plugin was away gets its own.
	p.restoreHolds(remembered, pods, known)
	// Hide-hyperthreads containers and holds placed while a sibling was
	// offline get it idle if it came online meanwhile, before anything is
	// placed that could take it (but after the containers that run on a
	// CPU keep it: the runtime is the truth); those pinned again or
	// adopted below get theirs after.
	p.alloc.ReserveHiddenSiblings()
	// Containers that do not run where they should (the runtime created
	// them without our adjustment, or on CPUs this node lacks) are pinned
	// again once every container that runs correctly, and every hold, has
	// its CPUs; a quota-lifted one on part of a record whose other CPUs
	// another container now runs on keeps that part (keepLostShrink).
	updates, confined, keptAtRepair := p.repairAll(repair, remembered.Containers, pods)
	p.refuseDerivedResizes(refused)
	// Then the in-place resizes the runtime applied while the plugin was
	// down (the request changed, the cpuset the kubelet does not set did
	// not): applied by the rules of a live one, grown or shrunk where they
	// run, once every remembered container and hold has its CPUs and
	// before the containers the file does not know are placed anew. The
	// restart's order: restoreKnown (in readmitOrder: holders of
	// shared-pool CPUs first, containers off their record last),
	// keepResized, rebindClaims, adoptWhereTheyRun, restoreHolds,
	// ReserveHiddenSiblings, repairAll, refuseDerivedResizes,
	// resizeAsTheRuntime, adoptAll.
	updates = withUpdates(updates, p.resizeAsTheRuntime(known, pods))
	adopted, confinedNew := p.adoptAll(rest, pods)
	updates = append(updates, adopted...)
	p.alloc.ReserveHiddenSiblings()
	p.alloc.FollowShared()
	p.reportOfflineHeld()
	p.rebindGrants(append(known, unknown...), pods)
	updates = append(updates, p.followPools(append(known, unknown...))...)
	updates = p.liftQuotas(append(known, unknown...), updates)
	p.rememberAssignments()
	p.rememberCgroups(append(known, unknown...))
	p.rememberSynchronized()
	p.synced = true
	p.conn.synced.Store(p.conn.attempt.Load()) // ready (health.go)
	p.stateChanged()
	// A reload that came before this first Synchronize is checked
	// against the containers now known.
	p.applyQueuedReloadLater()
	// The reconciler's first pass: what the journal holds and nobody
	// wants any more is restored, whatever the node's config says now.
	if iso := p.isolation.Load(); iso != nil {
		iso.recon.Kick()
	}
	p.pinSandboxesLater()
	p.checkStartsLater(createdWithUpdates(containers, updates))
	p.auditSynchronized()
	p.metrics.synchronized.Inc()
	// Each container is counted once: a confined one is neither re-pinned
	// nor placed.
	p.log.Infof("synchronized: %d containers kept, %d re-pinned, %d placed, %d confined, %d forgotten, %d CPU sets held for stopped containers, %d updates",
		len(known)-len(repair)+keptAtRepair, len(repair)-confined-keptAtRepair, len(unknown)-confinedNew, confined+confinedNew, p.countForgotten(remembered.Containers), len(p.alloc.Holds()), len(updates))
	return updates, nil
}

// startOver empties the in-memory view: after a runtime restart it is as
// stale as the file. The pod sandboxes to pin are the runtime's.
func (p *Plugin) startOver(pods []*api.PodSandbox) {
	p.alloc = allocator.New(p.topo, p.alloc.Layout(), p.cfg.PinMemory)
	p.recountClaimMemory()
	p.memory = state.NewState()
	p.pending = map[string]bool{} // Synchronize's updates cover every container
	p.sandbox, p.podSandboxes = map[string]sandbox{}, map[string]int{}
	for _, pod := range pods {
		p.addSandbox(pod)
	}
}

// restoreHolds re-adds the remembered holds of pods that still exist, and
// makes holds of remembered exclusive containers that stopped or vanished
// while the plugin was away (their exit code is unknown). Holds whose
// container runs again, or whose CPUs a running container took, end.
func (p *Plugin) restoreHolds(remembered *state.State, pods []*api.PodSandbox, running []*api.Container) {
	podUIDs, runs := map[string]bool{}, map[string]bool{}
	for _, pod := range pods {
		podUIDs[pod.GetUid()] = true
	}
	for _, c := range running {
		runs[c.GetId()] = true
	}
	var holds []allocator.Hold
	for _, key := range slices.Sorted(maps.Keys(remembered.Held)) {
		h := remembered.Held[key]
		a, _ := p.assignmentFromState(h.ContainerID, h.ContainerState)
		holds = append(holds, allocator.Hold{Assignment: a, ExitCode: h.ExitCode})
	}
	for _, id := range slices.Sorted(maps.Keys(remembered.Containers)) {
		if st := remembered.Containers[id]; !runs[id] && pools.IsExclusive(st.Pool) {
			a, _ := p.assignmentFromState(id, st)
			holds = append(holds, allocator.Hold{Assignment: a})
		}
	}
	holds = append(holds, p.migratePrevious(remembered.Previous, podUIDs)...)
	for _, h := range holds {
		who := h.Pod.ContainerName(h.Container)
		if !podUIDs[h.Pod.UID] {
			p.log.Infof("synchronize: pod of stopped container %s is gone; CPUs %s released", who, h.Held())
			continue
		}
		res, err := p.alloc.RestoreHold(h)
		switch {
		case err != nil:
			p.log.Warnf("synchronize: CPUs %s of stopped container %s no longer held: %v", h.Held(), who, err)
		case res.Warning != "":
			// Held, but not all of it (which CPUs went, and why), or
			// all of it although the config gives an offline CPU
			// another pool (the kubelet decides its CPUs: the conflict
			// and how to end it).
			p.log.Warnf("synchronize: stopped container %s: %s", who, res.Warning)
		}
	}
}

// migratePrevious turns the remembered CPUs of stopped containers from a
// state file written before holds existed into holds, if they are free;
// the pool is the exclusive pool that contains them.
func (p *Plugin) migratePrevious(previous map[string]string, podUIDs map[string]bool) []allocator.Hold {
	var holds []allocator.Hold
	for _, key := range slices.Sorted(maps.Keys(previous)) {
		uid, name, _ := strings.Cut(key, "/")
		cpus, clean := p.nodeCPUs(previous[key], "remembered CPUs of "+key)
		if !clean || cpus.IsEmpty() || !podUIDs[uid] {
			continue
		}
		for _, pool := range []string{pools.Exclusive, pools.ExclusiveNonIsolcpus} {
			if cpus.IsSubsetOf(p.alloc.Layout().Pool(pool)) {
				holds = append(holds, allocator.Hold{Assignment: allocator.Assignment{ID: "previous:" + key, Pod: allocator.PodRef{UID: uid},
					Container: name, Pool: pool, MilliCPU: int64(cpus.Size()) * 1000, CPUs: cpus, Reserved: cpuset.New()}})
				break
			}
		}
	}
	return holds
}

// splitRemembered separates the running containers the state remembers
// from those it does not, each sorted by id. Stopped containers hold no
// CPUs and are left out.
func splitRemembered(containers []*api.Container, remembered map[string]state.ContainerState) (known, unknown []*api.Container) {
	for _, c := range containers {
		if c.GetState() == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		if _, ok := remembered[c.GetId()]; ok {
			known = append(known, c)
		} else {
			unknown = append(unknown, c)
		}
	}
	sortContainers(known)
	sortContainers(unknown)
	return known, unknown
}

// adoptAll places the containers the state does not know and returns the
// updates that pin those that must move, and how many were confined.
// Those that show claim tokens go first, whatever their IDs: each binds
// its claim's request, which then beats any other container on its CPUs,
// also a grant container of the device plugin era on a claim the claims
// file remembers unanswered (a kill -9 before the mark was cleared), which
// adopted first would keep the claim's CPUs and confine the claim's own
// container for good. Then those the runtime runs pinned: they run where a
// decision whose record a kill lost put them, and one created unpinned
// while the plugin was away must not take their CPUs first (it would move
// them, or, showing a copy of one's kubelet grant token, take its CPUs and
// its grant).
func (p *Plugin) adoptAll(unknown []*api.Container, pods []*api.PodSandbox) ([]*api.ContainerUpdate, int) {
	podByID := podsByID(pods)
	var updates []*api.ContainerUpdate
	confined := 0
	rank := func(c *api.Container) int {
		switch {
		case showsClaimTokens(c.GetEnv()):
			return 0
		case c.GetLinux().GetResources().GetCpu().GetCpus() != "":
			return 1 // pinned
		}
		return 2
	}
	unknown = slices.Clone(unknown)
	slices.SortStableFunc(unknown, func(a, b *api.Container) int { return rank(a) - rank(b) })
	for _, c := range unknown {
		u, ok := p.adoptUnknown(podByID[c.GetPodSandboxId()], c)
		if u != nil {
			updates = append(updates, u)
		}
		if !ok {
			confined++
		}
	}
	return updates, confined
}

// repairAll pins again the remembered containers restoreKnown could not
// keep where they run, and counts those it had to confine and those it
// kept where they run after all (keepLostShrink).
func (p *Plugin) repairAll(repair []*api.Container, remembered map[string]state.ContainerState, pods []*api.PodSandbox) (_ []*api.ContainerUpdate, confined, kept int) {
	podByID := podsByID(pods)
	var updates []*api.ContainerUpdate
	for _, c := range repair {
		u, how := p.repairKnown(podByID[c.GetPodSandboxId()], c, remembered[c.GetId()])
		if u != nil {
			updates = append(updates, u)
		}
		switch how {
		case confinedAtRepair:
			confined++
		case keptShrunk:
			kept++
		}
	}
	return updates, confined, kept
}

// followPools returns updates for shared and infra members, and exclusive
// containers with a shared part, that do not run on their pool as it is
// now.
func (p *Plugin) followPools(containers []*api.Container) []*api.ContainerUpdate {
	var updates []*api.ContainerUpdate
	for _, c := range containers {
		a, ok := p.alloc.Get(c.GetId())
		if !ok || pools.IsExclusive(a.Pool) && !a.WithShared {
			continue
		}
		if cur, pinned := p.runtimeCPUs(c); !pinned || !cpulist.Equal(cur, runnable(a.Cpuset(), p.topo.Online)) {
			updates = append(updates, cpuUpdate(a, p.topo.Online, p.cfg.PinMemory))
		}
	}
	return updates
}

// countForgotten counts the remembered containers the runtime no longer
// runs.
func (p *Plugin) countForgotten(remembered map[string]state.ContainerState) int {
	n := 0
	for id := range remembered {
		if _, ok := p.alloc.Get(id); !ok {
			n++
		}
	}
	return n
}

// restoreKnown re-adds a remembered container where the runtime says it
// runs, if that is a place it may run (allocator.Readmit). A conflict with
// the configuration (e.g. the pool changed) keeps it there and is reported.
// It returns false, having added nothing, when the container must be
// pinned again (see repairKnown).
func (p *Plugin) restoreKnown(c *api.Container, st state.ContainerState) bool {
	r := p.remembered(c, st)
	who := rememberedRef(st)
	if st.IsolatedPartition && st.WithShared {
		p.log.Warnf("container %s: its cgroup is no longer an isolated partition: it runs on the shared pool too (%s), and the kernel runs a partition's threads only on its exclusive CPUs", who, allocator.AnnotationSharedCPUs)
	}
	res, outcome, err := p.alloc.Readmit(r)
	if res.Warning != "" {
		// Offline CPUs of its record that the config now gives another
		// pool (allocator/offlinecarved.go): hidden siblings that left
		// the record (dropOfflineSiblingsElsewhere), or CPUs the kubelet
		// chose that it keeps, and how to end that (keptForTheKubelet).
		p.log.Warnf("synchronize: %s", res.Warning)
	}
	switch outcome {
	case allocator.Kept:
		switch {
		case err == nil:
		case pools.IsExclusive(st.Pool):
			p.log.Warnf("kept container %s on CPUs %s although %v", who, r.Assignment.CPUs, err)
		default:
			p.log.Warnf("kept container %s in pool %s although %v", who, st.Pool, err)
		}
		return true
	case allocator.KeptWhereItRuns:
		p.log.Warnf("container %s runs on CPUs %s, the state said %s; keeping where it runs", who, r.RunsOn, r.Assignment.CPUs)
		if err != nil {
			// A note: why it was added off its pool's CPUs (its shared
			// part on infra while the shared pool is held). The note
			// names it by id only: the pod is what an operator greps for.
			p.log.Warnf("synchronize: container %s: %v", who, err)
		}
		return true
	}
	return false
}

// readmitOrder is the order restoreKnown takes the remembered containers
// in: first those whose record holds CPUs of the shared pool as now
// configured (exclusive containers a config change left there), then the
// others, each in id order; but an exclusive container the runtime runs
// off its record's online CPUs comes after every one that runs on them.
//
// Holders first: whether a shared-cpus container's CPUs on infra are its
// shared part depends on whether a shared CPU is free (allocator.Readmit):
// taken in id order before the holder, it found the pool free, took its
// shared part for CPUs it had no business on, and was repinned onto a
// stale record. A holder that does not run where its record says is not
// readmitted there, and the pool is free after all.
//
// Off-record ones last: Readmit may keep one where it runs
// (KeptWhereItRuns) on CPUs still free; taken first by id, it took CPUs
// another container's agreeing record holds, and that container, whose
// record and runtime agree, was moved.
func (p *Plugin) readmitOrder(known []*api.Container, remembered map[string]state.ContainerState) []*api.Container {
	shared := p.alloc.Layout().Pool(pools.Shared)
	holds := func(c *api.Container) bool {
		st := remembered[c.GetId()]
		if !pools.IsExclusive(st.Pool) {
			return false
		}
		// A malformed list holds nothing here; restoreKnown says why.
		cpus, err := cpulist.Parse(st.CPUs)
		if err != nil {
			return false
		}
		if reserved, err := cpulist.Parse(st.Reserved); err == nil {
			cpus = cpus.Union(reserved)
		}
		return !cpus.Intersection(shared).IsEmpty()
	}
	// offRecord: an exclusive container whose record's online CPUs are
	// not all in what the runtime runs it on (an unreadable list counts
	// too: restoreKnown says why). Offline ones do not count: cgroup v1
	// drops them from the cpuset, and Readmit keeps such a container on
	// its record (a holder ranked last for that judged the shared pool
	// free again).
	online := p.topo.Online
	offRecord := func(c *api.Container) bool {
		st := remembered[c.GetId()]
		if !pools.IsExclusive(st.Pool) {
			return false
		}
		cpus, err := cpulist.Parse(st.CPUs)
		runs, rerr := cpulist.Parse(c.GetLinux().GetResources().GetCpu().GetCpus())
		return err != nil || rerr != nil || !cpus.Intersection(online).IsSubsetOf(runs)
	}
	rank := func(c *api.Container) int {
		switch {
		case offRecord(c):
			return 2
		case holds(c):
			return 0
		}
		return 1
	}
	order := slices.Clone(known)
	slices.SortStableFunc(order, func(x, y *api.Container) int { return rank(x) - rank(y) })
	return order
}

// remembered reads a remembered container for the recovery rules: its
// record, and where the runtime runs it. Only an exclusive container's
// place is read: shared and infra members follow their pool wherever they
// run (followPools updates them).
func (p *Plugin) remembered(c *api.Container, st state.ContainerState) allocator.Remembered {
	r, wrote := p.readRemembered(c, st)
	if !wrote.Equals(r.Assignment.Mems) {
		p.noteForeignMems(foreignAtSynchronize, rememberedRef(st), wrote, r.Assignment.Mems.String())
	}
	return r
}

// readRemembered is remembered without the word on foreign mems, which
// restoreKnown has said already when keepResized reads a container again;
// wrote are the mems the record says the plugin wrote.
func (p *Plugin) readRemembered(c *api.Container, st state.ContainerState) (_ allocator.Remembered, wrote cpuset.CPUSet) {
	a, clean := p.assignmentFromState(c.GetId(), st)
	wrote = a.Mems
	if now := runtimeMems(c); p.cfg.PinMemory && pools.IsExclusive(st.Pool) && !now.IsEmpty() {
		// The runtime is the truth about where a container's memory is:
		// its pages are on the nodes of the mems it runs with, whatever we
		// wrote. They stay its mems (moving a running container's memory
		// is not ours to do) and its memory is counted there.
		a.Mems = now
	}
	a.Memory = p.alloc.MemoryOf(a, p.runtimeDemand(c, rememberedRef(st)))
	r := allocator.Remembered{Assignment: a, Damaged: !clean, RunsOn: cpuset.New()}
	if pools.IsExclusive(st.Pool) {
		if cur, pinned := p.runtimeCPUs(c); pinned {
			r.RunsOn = cur
		}
	}
	return r, wrote
}

// keepResized keeps, where the runtime runs them, the remembered exclusive
// containers of repair that run pinned on a set of another size than their
// record, of the size of the request the runtime shows for them: an
// in-place resize the runtime applied when the plugin replied, whose record
// a kill -9 before the background write (or a disk that refused it) lost.
// Pinned back on the record's CPUs, a grown container would lose the CPUs
// it asked for, and a shrunk one would take back CPUs another container may
// have been given since (allocator.ReadmitResized), in a shape a live
// resize under the options it reads makes (resizeRequest, or the options
// its record keeps when the policy refuses it under a new configuration);
// one refused is pinned again by repairAll and then resized by
// resizeAsTheRuntime as a live resize would be. They are taken in the
// order restoreKnown left them (readmitOrder); one whose set another container or hold has (two containers the
// runtime runs on one CPU: the one taken in first keeps it) is left to be
// pinned again, which is logged. It returns the containers still to
// repair, and the refused resizes it derived from an at-least request,
// for refuseDerivedResizes once repairAll has placed them.
func (p *Plugin) keepResized(repair []*api.Container, remembered map[string]state.ContainerState, pods []*api.PodSandbox) ([]*api.Container, []derivedRefusal) {
	podByID := podsByID(pods)
	var rest []*api.Container
	var refused []derivedRefusal
	for _, c := range repair {
		st := remembered[c.GetId()]
		r, _ := p.readRemembered(c, st)
		if !pools.IsExclusive(st.Pool) || r.RunsOn.IsEmpty() {
			rest = append(rest, c)
			continue
		}
		pod := podByID[c.GetPodSandboxId()]
		milli, atLeast := milliCPU(c, qosClass(pod))
		// Shares at their cap and no quota (the plugin lifted it) say
		// only "at least 256 CPUs", which no policy sizes an exclusive
		// container by. A running set that is a grow of the record (all
		// of the record's CPUs and more) is what a resize the plugin
		// accepted gave it, whole CPUs by its request: that is its
		// request. Judged as exactly the bound, it was refused and pinned
		// back on the record, and resizeAsTheRuntime, to which a record
		// that meets the bound is no resize, never said so. Any other set
		// is no grow, and its size says nothing of a request: a shrink
		// (cgroup v1 drops CPUs that go offline and never gives them
		// back; a live shrink of such a container cannot be told from
		// that) or a set moved from outside is pinned back on the record,
		// as an exact-request container's is, rather than the container
		// losing CPUs or its record rewritten to what it happens to run on.
		// Such a set goes to repairAll with no request read for it
		// (atLeastNoGrow): the bound is no request, and read as one the
		// container was logged as resized to 256 CPUs, with the advice
		// for a kubelet without a CFS quota. One whose record's CPUs
		// cannot be had again keeps a shrunk set there (keepLostShrink).
		derived := false
		if atLeast {
			part := p.alloc.ExclusivePart(r)
			if atLeastNoGrow(r.Assignment, part, milli, atLeast) {
				p.log.Infof("synchronize: container %s runs on %d CPUs %s, no grow of its record's %d CPUs %s; its quota lifted, the runtime shows its request only as at least 256 CPUs, which its record meets: no resize is read from the set",
					rememberedRef(st), part.Size(), part, r.Assignment.CPUs.Size(), r.Assignment.CPUs)
				rest = append(rest, c)
				continue
			}
			if n := int64(part.Size()); n*1000 >= milli && n > int64(r.Assignment.CPUs.Size()) && r.Assignment.CPUs.IsSubsetOf(part) {
				milli, atLeast, derived = n*1000, false, true
			}
		}
		// Its options as a live resize reads them: kept only in a shape a
		// resize makes (full-pcpus-only, hide-hyperthreads).
		req, err := p.resizeRequest(pod, c, r.Assignment, milli, atLeast)
		if err != nil {
			// The policy refuses it under the configuration now (its
			// namespace no longer allowed, the device plugin or DRA turned
			// on, ...). The plugin accepted the resize and the container
			// runs so: a refusal now is no reason to take CPUs from it,
			// which repairAll would (a lost grow pinned back on the
			// record's set, and resizeAsTheRuntime then refused the same
			// way). Its shape is judged by what the record knows of its
			// options: the request the runtime shows, hide-hyperthreads.
			if r.Assignment.MilliCPU != milli {
				p.log.Warnf("synchronize: container %s: the options of the resize to %dm it runs with cannot be read under the configuration now (%v); the shape of CPUs %s is judged by its record",
					rememberedRef(st), milli, err, r.RunsOn)
			}
			req = recordedResizeRequest(r.Assignment, milli)
		}
		res, err := p.alloc.ReadmitResized(r, req)
		if err != nil {
			if r.Assignment.MilliCPU != milli {
				p.log.Warnf("synchronize: container %s runs on CPUs %s with a request of %dm, the state said CPUs %s for %dm, and cannot stay: %v", rememberedRef(st), r.RunsOn, milli, r.Assignment.CPUs, r.Assignment.MilliCPU, err)
			}
			if derived {
				// resizeAsTheRuntime sees no resize in "at least" that the
				// record meets: refused, loudly, as a live one is, once
				// repairAll has said where it runs instead.
				refused = append(refused, derivedRefusal{record: r.Assignment, err: fmt.Errorf("nri-cpupool: container %s: a resize to %dm (the %d CPUs it runs on) applied while nri-cpupool was down cannot be kept: %w",
					rememberedRef(st), milli, milli/1000, err)})
			}
			rest = append(rest, c)
			continue
		}
		p.log.Warnf("synchronize: container %s runs on CPUs %s with a request of %dm, the state said CPUs %s for %dm (an in-place resize the state file did not record); keeping where it runs",
			rememberedRef(st), res.Assignment.CPUs, milli, r.Assignment.CPUs, r.Assignment.MilliCPU)
		if res.Warning != "" {
			// Why its shared part runs off the shared pool.
			p.log.Warnf("synchronize: container %s: %s", rememberedRef(st), res.Warning)
		}
	}
	return rest, refused
}

// derivedRefusal is a lost resize keepResized derived from an at-least
// request and could not keep: the container's record and why.
type derivedRefusal struct {
	record allocator.Assignment
	err    error
}

// refuseDerivedResizes counts and tells each pod of refused the refusal,
// with where repairAll put the container: pinned again on its record, or
// placed or confined elsewhere when its record's CPUs could not be had.
// Told before repairAll tried, the pod read "pinned again" of a container
// confined to infra.
func (p *Plugin) refuseDerivedResizes(refused []derivedRefusal) {
	for _, d := range refused {
		outcome := "it is not pinned"
		if a, ok := p.alloc.Get(d.record.ID); ok {
			switch {
			case a.Rule.Kind == allocator.RuleConfined:
				outcome = fmt.Sprintf("it is confined to pool %s (CPUs %s): its CPUs %s could not be had again", a.Pool, a.Cpuset(), d.record.CPUs)
			case a.Pool == d.record.Pool && a.CPUs.Equals(d.record.CPUs):
				outcome = fmt.Sprintf("it is pinned again on CPUs %s", a.CPUs)
			default:
				outcome = fmt.Sprintf("its CPUs %s could not be had again: it is placed in pool %s on CPUs %s", d.record.CPUs, a.Pool, a.Cpuset())
			}
		}
		_ = p.refuseResize(d.record, fmt.Errorf("%w; %s", d.err, outcome))
	}
}

// recordedResizeRequest is the request of a resize of the running
// container a to milli with the options its record keeps (whether it
// hides hyperthreads), for keepResized when the policy refuses to read
// them anew. full-pcpus-only is not recorded and so not checked.
func recordedResizeRequest(a allocator.Assignment, milli int64) allocator.Request {
	return allocator.Request{
		ID: a.ID, Pod: a.Pod, Container: a.Container, Pool: a.Pool, MilliCPU: milli,
		Options: config.Allocation{HideHyperthreads: a.HideHyperthreads},
	}
}

// resizeAsTheRuntime applies to the remembered running containers the
// in-place resizes the runtime applied while the plugin was down: the
// kubelet sent the new request, the runtime applied its shares and quota
// without the plugin, and the cpuset, which the kubelet does not set,
// stayed. The kubelet believes the resize done and never sends it again,
// and the runtime is the truth about the request too, which is an
// exclusive container's size: each one whose request the runtime shows
// differs from its record's is resized as a live UpdateContainer resizes
// it (applyResize): grown or shrunk in place, keeping the CPUs it runs on,
// or, when that cannot be, left as it is and said loudly (a warning, the
// refused count of cpupool_resizes_total, an event on its pod), as a live
// refusal is. Containers confined to infra are left out: their request
// could not be placed at all. It returns the updates that pin the resized
// ones.
//
// Shrinks (and changes within the CPUs a container has) are applied
// before grows. The kubelet admits a grow only into room the node has,
// which a shrink it sent earlier may have made; the runtime applied them
// in the kubelet's order, which the restart does not know. In any other
// order a grow that fits once the shrinks gave their CPUs back could find
// the pool full and be refused, and the kubelet never sends it again.
// Within shrinks and within grows the order stays (container id), so a
// restart decides the same way every time.
func (p *Plugin) resizeAsTheRuntime(known []*api.Container, pods []*api.PodSandbox) []*api.ContainerUpdate {
	podByID := podsByID(pods)
	type resized struct {
		c       *api.Container
		pod     *api.PodSandbox
		was     int64 // its record's request
		milli   int64
		atLeast bool
	}
	var todo []resized
	for _, c := range known {
		pod := podByID[c.GetPodSandboxId()]
		a, ok := p.alloc.Get(c.GetId())
		if pod == nil || !ok || a.Rule.Kind == allocator.RuleConfined {
			continue
		}
		milli, atLeast := milliCPU(c, qosClass(pod))
		if !cpuRequestChanged(a.MilliCPU, milli, atLeast) {
			continue
		}
		todo = append(todo, resized{c: c, pod: pod, was: a.MilliCPU, milli: milli, atLeast: atLeast})
	}
	// A grow needs more whole CPUs; a change within the CPUs it has needs
	// no room and goes with the shrinks.
	grows := func(r resized) bool { return allocator.CPUsFor(r.milli) > allocator.CPUsFor(r.was) }
	slices.SortStableFunc(todo, func(x, y resized) int {
		switch {
		case !grows(x) && grows(y):
			return -1
		case grows(x) && !grows(y):
			return 1
		}
		return 0
	})
	var updates []*api.ContainerUpdate
	for _, r := range todo {
		c, pod, milli, atLeast := r.c, r.pod, r.milli, r.atLeast
		// Read again: a resize before it may have moved a shared
		// container's CPUs (the shared pool grows with a shrink).
		a, ok := p.alloc.Get(c.GetId())
		if !ok {
			continue
		}
		who := containerRef(pod, c)
		res, err := p.applyResize(pod, c, a, milli, atLeast)
		if err != nil {
			p.log.Warnf("synchronize: container %s: the runtime shows a request of %dm, the state %dm (an in-place resize applied while nri-cpupool was down), which cannot be applied: %v; it keeps CPUs %s",
				who, milli, a.MilliCPU, err, a.Cpuset())
			continue
		}
		p.log.Warnf("synchronize: container %s: the runtime shows a request of %dm, the state %dm (an in-place resize applied while nri-cpupool was down); resized", who, milli, a.MilliCPU)
		if pools.IsExclusive(a.Pool) && !res.Assignment.Cpuset().Equals(a.Cpuset()) {
			updates = append(updates, cpuUpdate(res.Assignment, p.topo.Online, p.cfg.PinMemory))
		}
	}
	return updates
}

// withUpdates adds newer to updates, each in place of an update of the
// same container there: a container gets one update, its last decision.
func withUpdates(updates, newer []*api.ContainerUpdate) []*api.ContainerUpdate {
	for _, u := range newer {
		i := slices.IndexFunc(updates, func(o *api.ContainerUpdate) bool { return o.GetContainerId() == u.GetContainerId() })
		if i < 0 {
			updates = append(updates, u)
			continue
		}
		updates[i] = u
	}
	return updates
}

// adoptWhereTheyRun takes in, where they run, the containers the state
// does not know that the runtime runs pinned on a set they may keep (an
// earlier decision whose record a kill lost), and returns the others, for
// adoptAll.
func (p *Plugin) adoptWhereTheyRun(unknown []*api.Container, pods []*api.PodSandbox) []*api.Container {
	podByID := podsByID(pods)
	var rest []*api.Container
	for _, c := range unknown {
		if !p.adoptWhereItRuns(podByID[c.GetPodSandboxId()], c) {
			rest = append(rest, c)
		}
	}
	return rest
}

// adoptWhereItRuns is adoptUnknown for a container only if it stays where
// the runtime runs it (allocator.AdoptWhereItRuns); it tells whether it
// did. Nothing is confined nor bound otherwise: adoptUnknown takes it
// later.
func (p *Plugin) adoptWhereItRuns(pod *api.PodSandbox, c *api.Container) bool {
	current, pinned := p.runtimeCPUs(c)
	if pod == nil || !pinned {
		return false
	}
	who := containerRef(pod, c)
	req, claims, err := p.adoptionRequest(pod, c, who, 0)
	if err != nil {
		return false
	}
	defer p.detachClaims(&claims)
	if _, ok := p.alloc.AdoptWhereItRuns(req, current, runtimeMems(c)); !ok {
		return false
	}
	p.adopted(who, req, &claims)
	p.log.Infof("synchronize: container %s stays on %s CPUs %s", who, req.Pool, current)
	return true
}

// adoptionRequest is the request of a running container the state does not
// know, as its creation's would be, with the claims it shows attached
// (the caller detaches them unless it is placed). An error says why it
// cannot be placed, and nothing is attached. recorded, when not 0, is the
// request its record keeps for one whose runtime request says only "at
// least" as much (recordedAtLeast): its size, which the runtime no longer
// shows.
func (p *Plugin) adoptionRequest(pod *api.PodSandbox, c *api.Container, who string, recorded int64) (allocator.Request, claimBinding, error) {
	if err := allocator.CheckAnnotations(pod.GetAnnotations()); err != nil {
		return allocator.Request{}, claimBinding{}, err
	}
	info := p.toContainer(pod, c)
	if recorded > 0 && info.MilliCPUAtLeast && recorded >= info.MilliCPU {
		info.MilliCPU, info.MilliCPUAtLeast = recorded, false
	}
	info.Demand = p.runtimeDemand(c, who)
	if _, err := p.attachGrant(pod, c, &info, true); err != nil {
		return allocator.Request{}, claimBinding{}, err // the token is bound by rebindGrants if it is placed
	}
	claims, err := p.attachClaims(pod, c, &info)
	if err != nil {
		return allocator.Request{}, claimBinding{}, err
	}
	req, err := p.policy.Request(info, p.resolveDeviceNUMA)
	if err != nil {
		p.detachClaims(&claims)
		return allocator.Request{}, claimBinding{}, err
	}
	return req, claims, nil
}

// adopted binds a placed container's claims and says what of its request
// was not applied.
func (p *Plugin) adopted(who string, req allocator.Request, claims *claimBinding) {
	p.bindClaims(claims)
	p.notePartitionSkipped(who, req)
	p.noteNotAllowed(who, req)
}

// repairKnown pins a remembered exclusive container that does not run
// where it may: back on its remembered CPUs when they are free
// (allocator.Repin), else, a quota-lifted one on part of them, kept where
// it runs (keepLostShrink), else placed anew, else confined to infra.
func (p *Plugin) repairKnown(pod *api.PodSandbox, c *api.Container, st state.ContainerState) (*api.ContainerUpdate, repaired) {
	r := p.remembered(c, st)
	who := rememberedRef(st)
	runs := "every CPU"
	if !r.RunsOn.IsEmpty() {
		runs = "CPUs " + r.RunsOn.String()
	} else if set, err := cpulist.Parse(c.GetLinux().GetResources().GetCpu().GetCpus()); err == nil && !set.IsEmpty() {
		// A cpuset naming a CPU hot-removed since: the kernel runs it on
		// the others, not on every CPU.
		gone := p.alloc.Absent(set)
		runs = fmt.Sprintf("CPUs %s (%s no longer %s)", set, plural.CPUs(gone), plural.Verb(gone.Size(), "exists", "exist"))
	}
	res, outcome, note := p.alloc.Repin(r)
	if outcome == allocator.Repinned {
		p.log.Warnf("synchronize: container %s runs on %s, not on its CPUs %s; pinned again", who, runs, res.Assignment.Cpuset())
		if res.Warning != "" {
			// Offline CPUs of its record that the config now gives
			// another pool (allocator/offlinecarved.go): hidden
			// siblings that left the record
			// (dropOfflineSiblingsElsewhere), or CPUs the kubelet chose
			// that it keeps, and how to end that (keptForTheKubelet).
			p.log.Warnf("synchronize: %s", res.Warning)
		}
		if note != nil {
			// Why it was added off its pool's CPUs (Repin's note).
			p.log.Warnf("synchronize: container %s: %v", who, note)
		}
		return cpuUpdate(res.Assignment, p.topo.Online, p.cfg.PinMemory), repinned
	}
	if pod == nil {
		u, _ := p.confine(nil, c, rememberedPod(st), who, fmt.Errorf("its pod sandbox is gone"))
		return u, confinedAtRepair
	}
	kept, shrunk := p.keepLostShrink(pod, c, st, note)
	if kept {
		return nil, keptShrunk // it runs there already
	}
	recorded, explain := recordedAtLeast(c, qosClass(pod), r.Assignment, note, shrunk)
	switch {
	case recorded > 0 && recorded == shrunk:
		// The kubelet shrank it; the record's larger request is stale.
		p.log.Warnf("synchronize: container %s runs on %s and its CPUs %s cannot be restored (%v); placing the request of %dm read from the CPUs it runs on again, not its record's stale %dm (a live shrink its record lost; the runtime shows it only as at least 256 CPUs)",
			who, runs, st.CPUs, note, recorded, r.Assignment.MilliCPU)
	case recorded > 0:
		p.log.Warnf("synchronize: container %s runs on %s and its CPUs %s cannot be restored (%v); placing its record's request of %dm again (the runtime shows it only as at least 256 CPUs)",
			who, runs, st.CPUs, note, recorded)
	default:
		p.log.Warnf("synchronize: container %s runs on %s and its CPUs %s cannot be restored (%v); placing it again", who, runs, st.CPUs, note)
	}
	u, ok := p.adoptSized(pod, c, recorded, explain)
	if !ok {
		return u, confinedAtRepair
	}
	return u, repinned
}

// repaired is what repairKnown did with a remembered container.
type repaired int

const (
	// repinned: pinned again on its record, or placed anew.
	repinned repaired = iota
	// keptShrunk: kept where it runs (keepLostShrink), not pinned.
	keptShrunk
	// confinedAtRepair: confined to infra.
	confinedAtRepair
)

// adoptUnknown handles a container the state does not know (created while
// the plugin was away, or the state was lost) and returns the update that
// pins it, if it must move. A container it cannot place is confined to
// infra (ok false): left alone it would run on every CPU, exclusive ones
// included.
func (p *Plugin) adoptUnknown(pod *api.PodSandbox, c *api.Container) (*api.ContainerUpdate, bool) {
	return p.adoptSized(pod, c, 0, nil)
}

// adoptSized is adoptUnknown with the request of a remembered container
// the runtime shows only as "at least 256 CPUs" taken from what is known of
// it (recorded, 0 for none: its record's, or the one read from a lost
// shrink), and explain, when not nil, making the reason it is confined with
// say the whole of it: why its record could not be had, and what to do
// (recordedAtLeast).
func (p *Plugin) adoptSized(pod *api.PodSandbox, c *api.Container, recorded int64, explain func(error) error) (*api.ContainerUpdate, bool) {
	if pod == nil {
		return p.confine(nil, c, allocator.PodRef{}, c.GetId(), fmt.Errorf("it has no pod sandbox"))
	}
	who := containerRef(pod, c)
	confine := func(err error) (*api.ContainerUpdate, bool) {
		if explain != nil {
			err = explain(err)
		}
		return p.confine(pod, c, podRef(pod), who, err)
	}
	req, claims, err := p.adoptionRequest(pod, c, who, recorded)
	if err != nil {
		return confine(err)
	}
	defer p.detachClaims(&claims) // confined, it takes nothing of its claims
	current, pinned := p.runtimeCPUs(c)
	if !pinned {
		current = cpuset.New()
	}
	res, how, err := p.alloc.Adopt(req, current, runtimeMems(c))
	if err == nil {
		p.adopted(who, req, &claims)
	}
	switch {
	case err != nil:
		return confine(err)
	case how == allocator.StaysWhereItRuns:
		p.log.Infof("synchronize: container %s stays on %s CPUs %s", who, req.Pool, current)
		return nil, true // its quota, if any, is lifted by liftQuotas
	case pools.IsExclusive(req.Pool):
		p.log.Infof("synchronize: placed container %s on %s CPUs %s", who, req.Pool, res.Assignment.CPUs)
		p.eventRepinned(pod, who, res.Assignment, current)
		return cpuUpdate(res.Assignment, p.topo.Online, p.cfg.PinMemory), true
	}
	return nil, true // shared/infra members are updated by the caller if needed
}

// confine puts a container Synchronize cannot place into infra, where it
// overlaps no exclusive CPU, and says why, on its pod too when it has one.
// ref is its pod: the runtime's, or the remembered one when the runtime
// no longer has the sandbox (memory was started over, so it cannot be
// looked up here). Its rule says it was confined and why, so that explain
// and status name the pod and the reason: explain shows a running
// container's rule, and hides a refusal of a container it has a record of.
func (p *Plugin) confine(pod *api.PodSandbox, c *api.Container, ref allocator.PodRef, who string, reason error) (*api.ContainerUpdate, bool) {
	p.metrics.countRefusal(refusedSynchronize)
	why := fmt.Sprintf("when nri-cpupool synchronized with the runtime: %v; recreate the pod to place it again", reason)
	_, err := p.alloc.Allocate(allocator.Request{ID: c.GetId(), Pod: ref, Container: c.GetName(), Pool: pools.Infra,
		NUMANodes: cpuset.New(), PreferNUMA: cpuset.New(), Rule: allocator.Rule{Kind: allocator.RuleConfined, Detail: "to pool " + pools.Infra + " " + why}})
	if err != nil {
		p.log.Errorf("synchronize: container %s cannot be placed (%v) nor confined to infra: %v", who, reason, err)
		return nil, false
	}
	p.log.Errorf("synchronize: container %s confined to infra: %v", who, reason)
	if pod != nil && p.wantsEvents() {
		p.postEvent(podRef(pod), true, EventConfined, fmt.Sprintf("container %s: confined to pool %s %s", who, pools.Infra, why))
	}
	return nil, false // the caller updates infra members
}

// rebindGrants binds the token of every running container of the resource
// to it again, once every container is placed: the runtime is the truth.
// A binding made since the grants file was last written (a kill between
// the state write and the grants write) is not on disk, and a token left
// unbound while its container runs could be shown by another pod, which
// would then run on CPUs the kubelet never allocated to it once the owner's
// pod ended. A token the daemon no longer knows (the grants file was
// damaged and moved aside) is made again from where the container runs: it
// was admitted with that token, since an unknown token refuses the
// creation. A token bound to another container stays with it: a binding
// never moves.
func (p *Plugin) rebindGrants(running []*api.Container, pods []*api.PodSandbox) {
	podByID := podsByID(pods)
	for _, c := range running {
		pod := podByID[c.GetPodSandboxId()]
		a, ok := p.alloc.Get(c.GetId())
		if pod == nil || !ok || a.Pool != pools.Exclusive {
			continue
		}
		tok, present, err := grantToken(c.GetEnv())
		if err != nil || !present {
			continue
		}
		who := containerRef(pod, c)
		g, known := p.grants.byToken[tok]
		switch {
		case !known:
			p.grants.add(tok, grant{CPUs: a.CPUs.String(), PodUID: pod.GetUid(), Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: c.GetName()})
			p.grantsChanged()
			p.log.Warnf("synchronize: kubelet grant of container %s (CPUs %s) was not in the grants file; made again from where it runs", who, a.CPUs)
		case g.PodUID != "" && (g.PodUID != pod.GetUid() || (g.Container != "" && g.Container != c.GetName())):
			p.log.Warnf("synchronize: container %s shows the grant of container %s; the grant stays with it", who, allocator.PodRef{Namespace: g.Namespace, Name: g.Pod}.ContainerName(g.Container))
			continue
		}
		p.bindGrant(tok, pod, c)
	}
}

// rebindClaims binds again the DRA claims that every running container
// the state remembers shows, as rebindGrants does for kubelet grants: the
// runtime is the truth. The claims file may lack a binding the state has
// (a kill -9 before the driver's background write, or a write that
// failed), and a request left unbound while its owner runs would go to the
// next pod the claim is reserved for that shows the token, on CPUs the
// owner runs on. A container the state remembers was admitted with its
// tokens, so it owns what they stand for; a request bound to another
// container, or a token the driver no longer knows (the claim was
// prepared again with new tokens, or its file was lost), stays as it is
// and is logged. Called before any container the state does not know is
// placed: adoption binds their tokens.
func (p *Plugin) rebindClaims(known []*api.Container, pods []*api.PodSandbox) {
	if p.claims == nil {
		return
	}
	podByID := podsByID(pods)
	for _, c := range known {
		pod := podByID[c.GetPodSandboxId()]
		if pod == nil || !claimsShown(c.GetEnv()) {
			continue
		}
		ctr := dracore.Container{PodUID: pod.GetUid(), Namespace: pod.GetNamespace(), Pod: pod.GetName(), Name: c.GetName()}
		g, ok, err := p.claims.Bind(c.GetEnv(), ctr)
		if err != nil {
			p.log.Warnf("synchronize: container %s: its ResourceClaims cannot be bound to it again: %v", containerRef(pod, c), err)
			continue
		}
		if ok {
			// The claims' memory is its own again too: a binding a kill
			// kept from the claims file would otherwise leave the claim's
			// reservation and the container's memory counted twice.
			p.bindClaimMemory(g.Keys, pod.GetUid(), c.GetName())
		}
	}
}

// liftQuotas lifts the CFS quota of every running container whose quota the
// allocator's rule lifts (exclusive, disableCPUQuota) but that the runtime
// reports with one, whichever way Synchronize kept or placed it: created
// while the plugin was away or without its adjustment (a kill between the
// decision and the reply), adopted without a record, or given its quota
// back by the kubelet while the plugin was down. The lift joins the
// container's update if it has one.
func (p *Plugin) liftQuotas(running []*api.Container, updates []*api.ContainerUpdate) []*api.ContainerUpdate {
	byID := make(map[string]*api.ContainerUpdate, len(updates))
	for _, u := range updates {
		byID[u.GetContainerId()] = u
	}
	for _, c := range running {
		a, ok := p.alloc.Get(c.GetId())
		if !ok || !a.NoCPUQuota || c.GetLinux().GetResources().GetCpu().GetQuota().GetValue() <= 0 {
			continue
		}
		u := byID[c.GetId()]
		if u == nil {
			u = cpuUpdate(a, p.topo.Online, p.cfg.PinMemory)
			byID[c.GetId()] = u
			updates = append(updates, u)
		}
		u.SetLinuxCPUQuota(noQuota)
	}
	return updates
}
