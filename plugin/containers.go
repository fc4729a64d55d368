package plugin

// The container handlers: a container's creation, update, stop and removal,
// and the updates they carry for the containers that follow a pool.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
)

// CreateContainer decides the container's pool and CPUs and returns the
// adjustment, plus updates for containers whose pool changed as a result.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	// Deferred first, so that it ends the last phase after the lock is
	// released.
	clock := p.clocks.Load().Start()
	defer clock.End()
	who := containerRef(pod, ctr)
	// Tenant input is bounded before it can hold the lock that every
	// other container waits for.
	if err := allocator.CheckAnnotations(pod.GetAnnotations()); err != nil {
		p.mu.Lock() // to record the refusal, once the input is checked
		defer p.mu.Unlock()
		return nil, nil, p.refuse(pod, ctr, err)
	}
	// A malformed demand refuses only a container whose memory is counted
	// (an exclusive one, below): shared and infra containers keep their
	// rules, which never read it.
	demand, demandErr := demandOf(ctr)
	others := otherContainerKeys(pod.GetAnnotations(), ctr.GetName())
	near := nearKeys(others, ctr.GetName())
	otherKeys := recordedKeys(near, others)
	clock.Mark(clockInput)
	p.mu.Lock()
	defer p.mu.Unlock()
	clock.Mark(clockLock)
	firstOfName := p.noteContainer(pod, ctr)
	if a, ok := p.alloc.Get(ctr.GetId()); ok {
		// A repeated event (after a reconnect): answer the same, record
		// nothing, and never undo what an earlier call decided.
		st := containerState(a)
		p.log.Infof("container %s: already placed in pool %s on CPUs %s", who, a.Pool, st.CPUs)
		return p.adjustment(runnableState(st, a, p.topo.Online)), p.takePending(), nil
	}
	info := p.toContainer(pod, ctr)
	info.Demand = demand
	tok, err := p.attachGrant(pod, ctr, &info, false)
	if err != nil {
		return nil, nil, p.refuse(pod, ctr, &allocator.Refusal{Reason: allocator.ReasonGrant, Err: err})
	}
	claims, err := p.attachClaims(pod, ctr, &info)
	if err != nil {
		return nil, nil, p.refuse(pod, ctr, &allocator.Refusal{Reason: allocator.ReasonClaim, Err: err})
	}
	// Refused from here on, the container takes nothing of its claims:
	// the memory it was lent goes back.
	defer p.detachClaims(&claims)
	req, err := p.policy.Request(info, p.resolveDeviceNUMA)
	if err != nil {
		return nil, nil, p.refuse(pod, ctr, err)
	}
	req.Rule.OtherContainerKeys = otherKeys
	if demandErr != nil && pools.IsExclusive(req.Pool) {
		return nil, nil, p.refuse(pod, ctr, &allocator.Refusal{Reason: allocator.ReasonPlacement, Err: demandErr})
	}
	clock.Mark(clockRequest)
	req.ReadHugePages = p.readHugePager // the nodes the decision needs, read under the lock: a few files
	res, err := p.alloc.Allocate(req)
	if err != nil && pools.IsExclusive(req.Pool) && p.reapGoneSandboxes(pod) > 0 {
		res, err = p.alloc.Allocate(req)
	}
	if err != nil {
		return nil, nil, p.refuse(pod, ctr, err)
	}
	clock.Mark(clockAllocate)
	// The reply does not wait for the state file: the writer persists the
	// decision in the background, and if this process dies before it does,
	// the next Synchronize finds the container where the runtime runs it.
	st := p.recordPlacement(res)
	p.forgetRefusal(pod, ctr)
	p.rememberCgroup(res.Assignment, ctr)
	if res.Assignment.NoCPUQuota {
		p.liftPodQuotaLater(pod.GetId()) // the pod cgroup's quota goes too
	}
	p.bindGrant(tok, pod, ctr)
	p.bindClaims(&claims)
	p.stateChanged()
	clock.Mark(clockRecord)
	p.decisions.Infof("%v", decisionLine{who: who, pool: st.Pool, cpus: st.CPUs, shared: withSharedNote(st), mems: st.Mems})
	clock.Mark(clockLog)
	if firstOfName && len(near) > 0 {
		p.hintTypo(pod, ctr, st.Pool, near)
	}
	p.notePartitionSkipped(who, req)
	p.noteNotAllowed(who, req)
	p.foreignMemsAtCreation(who, ctr, res.Assignment)
	if res.Warning != "" {
		p.log.Warnf("%s", res.Warning)
		p.postEvent(res.Assignment.Pod, true, EventMemoryNotLocal, res.Warning)
	}
	if pools.IsExclusive(st.Pool) {
		p.eventPinned(res.Assignment.Pod, containerName(ctr), st)
	}
	clock.Mark(clockNotes)
	updates := p.followers(res)
	p.decidedHook("CreateContainer", ctr.GetId())
	adj := p.adjustment(runnableState(st, res.Assignment, p.topo.Online))
	clock.Mark(clockReply)
	return adj, updates, nil
}

// refuse logs and counts a refused creation by the reason its error carries
// (allocator.ReasonOf), records it for explain (refusals.go), and wraps the
// error for the runtime, which shows it to the user: "nri-cpupool:
// container <namespace/pod/name>: <why>". The allocator's placement
// refusals pass as they are ("nri-cpupool: <why>"): they name the
// container themselves, with what it asked for. Called under the lock.
func (p *Plugin) refuse(pod *api.PodSandbox, ctr *api.Container, err error) error {
	who := containerRef(pod, ctr)
	reason := allocator.ReasonOf(err)
	logf := p.log.Errorf
	if tenantInput(reason) {
		// The pod's own input, not a fault of the plugin or the node:
		// its owner is told (the Event, the runtime's error).
		logf = p.log.Warnf
	}
	p.metrics.countRefusal(reason)
	if reason == allocator.ReasonPlacement && strings.Contains(err.Error(), who) {
		logf("refused: %v", err) // it names the container
		err = fmt.Errorf("nri-cpupool: %w", err)
	} else {
		logf("refusing container %s: %v", who, err)
		err = fmt.Errorf("nri-cpupool: container %s: %w", who, err)
	}
	// The pod's owner sees it in `kubectl describe pod` too, with the
	// runtime's words.
	p.eventRefused(pod, err)
	p.noteRefusal(pod, ctr, reason, err.Error())
	return err
}

// tenantInput tells whether a refusal's reason is the pod's own input (an
// annotation, a namespace asking for a pool it may not use, a grant or
// claim token that is not its own), logged at warning; a pool that cannot
// fit the container or a power class the node cannot apply is the
// operator's to act on, logged at error.
func tenantInput(reason string) bool {
	switch reason {
	case allocator.ReasonAnnotation, allocator.ReasonNamespace, allocator.ReasonGrant, allocator.ReasonClaim:
		return true
	}
	return false
}

// adjustment pins a new container to its assignment, from its record (the
// CPU lists already written out). It is what NRI's setters
// (SetLinuxCPUSetCPUs, SetLinuxCPUSetMems, SetLinuxCPUQuota, AddEnv) make,
// field for field, but built in one allocation instead of up to thirteen
// (each setter allocates its part): it is made under the lock, on the
// path of every creation's reply (issue 45). TestAdjustmentAsSetters
// holds it to the setters' result.
func (p *Plugin) adjustment(st state.ContainerState) *api.ContainerAdjustment {
	b := new(pinAdjustment)
	b.adj.Linux = &b.linux
	b.linux.Resources = &b.resources
	b.resources.Cpu = &b.cpu
	cpus := cpusetOf(st)
	b.cpu.Cpus = cpus
	if p.cfg.PinMemory && st.Mems != "" {
		b.cpu.Mems = st.Mems
	}
	if st.NoCPUQuota {
		b.quota.Value = noQuota
		b.cpu.Quota = &b.quota
	}
	b.adj.Env = b.envp[:0]
	b.addEnv(EnvCPUs, cpus)
	b.addEnv(EnvMems, st.Mems)
	b.addEnv(EnvPool, st.Pool)
	if st.WithShared {
		b.addEnv(EnvExclusiveCPUs, st.CPUs)
		b.addEnv(EnvSharedCPUs, st.SharedCPUs)
	}
	return &b.adj
}

// pinAdjustment holds the parts of a creation's adjustment, which point
// into it: the adjustment and what its pointers lead to, allocated
// together.
type pinAdjustment struct {
	adj       api.ContainerAdjustment
	linux     api.LinuxContainerAdjustment
	resources api.LinuxResources
	cpu       api.LinuxCPU
	quota     api.OptionalInt64
	env       [pinEnvs]api.KeyValue
	envp      [pinEnvs]*api.KeyValue
}

// pinEnvs is how many environment variables an adjustment sets at most.
const pinEnvs = 5

// addEnv is AddEnv with the variable kept in b while it has room (pinEnvs),
// and allocated on its own beyond that, so that a variable added later
// costs an allocation, not a panic under the lock.
func (b *pinAdjustment) addEnv(key, value string) {
	var kv *api.KeyValue
	if n := len(b.adj.Env); n < len(b.env) {
		kv = &b.env[n]
	} else {
		kv = new(api.KeyValue)
	}
	kv.Key, kv.Value = key, value
	b.adj.Env = append(b.adj.Env, kv)
}

// decidedHook runs the test hook, if any, between a decision (recorded in
// memory; the writer persists it in the background, perhaps not yet) and
// its reply: the window in which a crash leaves the runtime without the
// reply while the plugin has decided.
func (p *Plugin) decidedHook(event, id string) {
	if p.beforeReply != nil {
		p.beforeReply(event, id)
	}
}

// followers converts a decision's side effects, and any pending ones, into
// updates and re-pins the sandboxes when infra changed.
func (p *Plugin) followers(res allocator.Result) []*api.ContainerUpdate {
	for _, u := range res.Updates {
		p.pending[u.ID] = true
	}
	if res.InfraChanged {
		p.log.Infof("infra is now %s: updating %d containers and %d sandboxes", p.alloc.PoolCPUs(pools.Infra), len(p.pending), len(p.sandbox))
		p.pinSandboxesLater()
	}
	return p.takePending()
}

// takePending turns the pending containers into updates with their
// current assignment.
func (p *Plugin) takePending() []*api.ContainerUpdate {
	if len(p.pending) == 0 {
		return nil
	}
	var updates []*api.ContainerUpdate
	for _, id := range slices.Sorted(maps.Keys(p.pending)) {
		if a, ok := p.alloc.Get(id); ok {
			updates = append(updates, cpuUpdate(a, p.topo.Online, p.cfg.PinMemory))
		}
	}
	clear(p.pending)
	return updates
}

// deferFollowers records side effects of a handler that cannot return
// updates (RemoveContainer, RemovePodSandbox); the next reply carries them,
// computed when it is sent. They are never sent on their own: an
// unsolicited update travels beside the replies, so the runtime could apply
// an older "infra grew" after a newer "infra shrank" and put an infra
// container on a CPU lent to an exclusive one. Only pools growing are ever
// deferred (a release never shrinks one), so until then members run on a
// subset of their pool, never on a CPU someone else holds (shared users
// sent to infra while a kept container held the whole shared pool go back
// to it with that next reply, not when the holder is removed). Sandboxes
// follow without waiting for a reply: the pinner takes them at once.
func (p *Plugin) deferFollowers(res allocator.Result) {
	for _, u := range res.Updates {
		p.pending[u.ID] = true
	}
	if res.InfraChanged {
		p.pinSandboxesLater()
	}
}

// UpdateContainer resizes a container whose CPU request or memory limit
// changed (an in-place pod resize) and keeps a pinned container's cpuset
// when someone (the kubelet's static CPU manager, an operator) tries to
// change it.
func (p *Plugin) UpdateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	// The new memory limit, read before the lock as a creation's is.
	memLimit, memAsked := memoryLimitOf(res)
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.alloc.Get(ctr.GetId())
	if !ok {
		return nil, nil
	}
	// An in-place resize of any of the pod's containers makes the kubelet
	// write the pod cgroup's CFS quota again (SetPodCgroupConfig), and the
	// pinner lifts it again if the pod needs it. The kubelet reads a lifted
	// pod quota as no limit, so it takes any new limit for a larger one and
	// writes it before this update (a smaller one would come after): the
	// round asked for here comes after the kubelet's write.
	if a.NoCPUQuota || p.sandbox[pod.GetId()].podQuotaLifted {
		p.liftPodQuotaLater(pod.GetId())
	}
	if milli, atLeast := milliOf(res.GetCpu(), qosClass(pod)); cpuRequestChanged(a.MilliCPU, milli, atLeast) {
		// Refused for a container of the kubelet's devices or a claim
		// (applyResize).
		return p.resize(pod, ctr, a, milli, atLeast, memLimit, memAsked)
	}
	if memAsked && p.resizeMemory(a, memLimit) {
		p.stateChanged()
	}
	// The kubelet sets a quota with every update; a lifted one stays lifted.
	quota := a.NoCPUQuota && res.GetCpu().GetQuota().GetValue() > 0
	override := false
	if want := res.GetCpu().GetCpus(); want != "" {
		set, err := cpulist.Parse(want)
		override = err != nil || !cpulist.Equal(set, a.Cpuset()) && !cpulist.Equal(set, runnable(a.Cpuset(), p.topo.Online))
		if override && !p.overrode[a.ID] {
			p.overrode[a.ID] = true
			p.log.Warnf("container %s: keeping CPUs %s (%s pool) instead of the requested %s; set the kubelet's cpuManagerPolicy to none",
				containerRef(pod, ctr), a.Cpuset(), a.Pool, cpulist.Echo(want))
		}
	}
	if p.foreignMemsAsked(pod, ctr, a, res) {
		override = true // our mems, where its memory is counted
	}
	if !override && !quota {
		return nil, nil
	}
	u := cpuUpdate(a, p.topo.Online, p.cfg.PinMemory)
	u.IgnoreFailure = false
	if quota {
		u.SetLinuxCPUQuota(noQuota)
	}
	delete(p.pending, a.ID)
	return append([]*api.ContainerUpdate{u}, p.takePending()...), nil
}

// noQuota is the CFS quota that means none: cpu.cfs_quota_us -1 on cgroup
// v1, "max" in cpu.max on v2.
const noQuota = -1

// StopContainer ends a container's run. Exclusive CPUs stay held for its
// pod (its next run, or the pod's later containers) until the pod's
// sandbox stops; shared and infra members simply leave their pool.
func (p *Plugin) StopContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended.add(ctr.GetId())
	res := p.stop(ctr)
	delete(p.overrode, ctr.GetId())
	delete(p.memsOverrode, ctr.GetId())
	p.stateChanged()
	updates := p.followers(res)
	p.decidedHook("StopContainer", ctr.GetId())
	return updates, nil
}

// RemoveContainer forgets a container. A removed container's held CPUs
// stay held: the kubelet removes dead containers (garbage collection,
// pruning of init containers) while their pod is active and may still run
// the container again. One removed without a stop is stopped here.
func (p *Plugin) RemoveContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended.add(ctr.GetId())
	if _, ok := p.alloc.Get(ctr.GetId()); !ok {
		return nil
	}
	res := p.stop(ctr)
	p.deferFollowers(res)
	p.stateChanged()
	return nil
}

// stop ends a container's run; its exclusive CPUs stay held for its pod.
func (p *Plugin) stop(ctr *api.Container) allocator.Result {
	res := p.alloc.Stop(ctr.GetId(), exitCode(ctr))
	delete(p.cgroups, ctr.GetId())
	p.recordRelease(res)
	if a := res.Assignment; pools.IsExclusive(a.Pool) && a.Pod.UID != "" {
		p.log.Infof("container %s stopped: CPUs %s held for its pod until the pod sandbox stops", a.Pod.ContainerName(a.Container), a.Held())
	}
	return res
}

// exitCode is the exit code the runtime reported for a stopped container,
// nil if it reported none (no finish time).
func exitCode(ctr *api.Container) *int32 {
	if ctr.GetFinishedAt() == 0 {
		return nil
	}
	code := ctr.GetExitCode()
	return &code
}
