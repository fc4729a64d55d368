// Package plugin is the NRI glue: it turns runtime events into allocator
// decisions and those into container adjustments and updates, pins pod
// sandboxes through cgroupfs and keeps the state file.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Environment variables given to every container: CMK's CMK_CPUS_ASSIGNED,
// without a wrapper. They describe the assignment at creation; shared and
// infra containers follow their pool later through cgroups only.
const (
	EnvCPUs = "CPUPOOL_CPUS"
	EnvMems = "CPUPOOL_MEMS"
	EnvPool = "CPUPOOL_POOL"
)

// Plugin handles NRI events. One mutex serializes decisions and state.
type Plugin struct {
	mu     sync.Mutex
	cfg    *config.Config
	topo   *sysfs.Topology
	alloc  *allocator.Allocator
	policy *allocator.Policy
	store  Store
	pinner *cgroupPinner
	log    *logrus.Logger
	// loaded tells that the state file has been read: it is read once,
	// before the first Synchronize.
	loaded bool
	// memory is what survives a restart, in the state file's form: read
	// from the file, then kept equal to the allocator's assignments by each
	// decision (recordPlacement, recordRelease), so that a save does not
	// re-derive them, and written by save. Synchronize reconciles it with
	// the runtime.
	memory   *State
	sandbox  map[string]sandbox // pod sandboxes to keep pinned to infra, by id
	overrode map[string]bool    // containers whose cpuset change we refused, logged once
	metrics  *metrics
	// usage is the pools' usage as of the last decision, for the metrics.
	usage usageSnapshot
	// pending are containers whose cpuset changed in a handler that cannot
	// return updates (RemoveContainer, RemovePodSandbox); the next reply
	// or an asynchronous UpdateContainers, whichever comes first, carries them.
	pending map[string]bool
	// updater sends unsolicited updates on the current connection; nil
	// while disconnected.
	updater func([]*api.ContainerUpdate) ([]*api.ContainerUpdate, error)
	// runtime is what the connected runtime said about itself; it decides
	// whether updater may be used at all.
	runtime runtimeInfo
	// nriVersion reports the runtime's NRI version on the current
	// connection (the NRI stub's view); set by Run. assumeNRIVersion, if
	// set, replaces it (tests play old runtimes with today's NRI library).
	nriVersion       func() string
	assumeNRIVersion string
	// grants are the kubelet's allocations of cpupool.dev/exclusive;
	// changed tells the device plugin to re-read the devices.
	grants  *grants
	changed chan struct{}
}

// New builds a plugin for a node. The state is loaded here; it is
// reconciled with the runtime in Synchronize.
func New(cfg *config.Config, topo *sysfs.Topology, store Store, log *logrus.Logger) (*Plugin, error) {
	p := &Plugin{topo: topo, store: store, log: log, memory: NewState(), sandbox: map[string]sandbox{}, overrode: map[string]bool{},
		pending: map[string]bool{}, changed: make(chan struct{}, 1)}
	p.metrics = newMetrics(&p.usage)
	g, err := loadGrants(GrantsFile(cfg.StateFile))
	if err != nil {
		return nil, err
	}
	p.grants = g
	if err := p.configure(cfg); err != nil {
		return nil, err
	}
	return p, nil
}

// loadState reads the state once, before the first Synchronize: late, so
// that a runtime-launched plugin can take its state file from the runtime's
// configuration.
func (p *Plugin) loadState() error {
	if p.loaded {
		return nil
	}
	st, err := p.store.Load()
	switch {
	case errors.Is(err, ErrStateDiscarded):
		p.log.Warnf("%v", err)
	case err != nil:
		return err
	}
	p.memory, p.loaded = st, true
	p.log.Infof("state: %d containers remembered, to reconcile with the runtime", len(st.Containers))
	return nil
}

// Close releases the state store's resources.
func (p *Plugin) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.store.Close()
}

func (p *Plugin) configure(cfg *config.Config) error {
	layout, problems := allocator.BuildLayout(p.topo, cfg)
	for _, w := range problems.Warnings() {
		p.log.Warnf("config: %s", w)
	}
	if problems.HasErrors() {
		return problems.Errors().In("configuration")
	}
	p.cfg = cfg
	p.alloc = allocator.New(p.topo, layout, cfg.PinMemory)
	p.policy = allocator.NewPolicy(cfg)
	p.pinner = newCgroupPinner(cfg.CgroupRoot)
	p.publishUsage()
	p.log.Infof("pools: %s", layout.Describe())
	p.log.Infof("sandboxes: %s", p.pinner.Hierarchy())
	if p.changed != nil {
		p.notify()
	}
	return nil
}

// Configure receives the runtime's configuration for runtime-launched
// plugins: a non-empty config replaces the file's.
func (p *Plugin) Configure(_ context.Context, cfg, runtime, version string) (api.EventMask, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runtime = runtimeInfo{name: runtime, version: version, nriVersion: api.UnknownVersion}
	switch {
	case p.assumeNRIVersion != "":
		p.runtime.nriVersion = p.assumeNRIVersion
	case p.nriVersion != nil:
		p.runtime.nriVersion = p.nriVersion()
	}
	if p.runtime.pluginUpdatesSafe() {
		p.log.Infof("connected to %s %s (NRI %s)", runtime, version, p.runtime.nriVersion)
	} else {
		p.log.Infof("connected to %s %s (NRI %s, before %s): updates after a removal wait for the next container event (containerd/nri#301)",
			runtime, version, p.runtime.nriVersion, minNRIForPluginUpdates)
	}
	connected := p.runtime
	p.metrics.connected.Store(&connected)
	if strings.TrimSpace(cfg) != "" {
		parsed, err := config.Parse(strings.NewReader(cfg), "NRI plugin config")
		if err != nil {
			return 0, err
		}
		// The topology was read from the configured sysfs root; a state file
		// named here applies only before any state was loaded.
		parsed.SysfsRoot = p.cfg.SysfsRoot
		switch {
		case parsed.StateFile == config.Default().StateFile || parsed.StateFile == p.cfg.StateFile:
			parsed.StateFile = p.cfg.StateFile
		case !p.loaded:
			p.store = NewFileStore(parsed.StateFile)
			g, err := loadGrants(GrantsFile(parsed.StateFile))
			if err != nil {
				return 0, err
			}
			p.grants = g
		default:
			return 0, fmt.Errorf("stateFile cannot change from %s to %s while running", p.cfg.StateFile, parsed.StateFile)
		}
		if err := p.configure(parsed); err != nil {
			return 0, err
		}
	}
	if err := p.loadState(); err != nil {
		return 0, err
	}
	return api.MustParseEventMask("RunPodSandbox,StopPodSandbox,RemovePodSandbox,CreateContainer,UpdateContainer,StopContainer,RemoveContainer"), nil
}

// Synchronize reconciles the remembered state with the runtime, which is the
// truth about which containers exist and where they run: containers that
// still exist keep exactly their CPUs, vanished ones are freed, and ones
// created while the plugin was away are placed and updated.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, containers []*api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.loadState(); err != nil {
		return nil, err
	}
	remembered := p.memory
	p.startOver(pods)
	podUIDs := map[string]bool{}
	for _, pod := range pods {
		podUIDs[pod.GetUid()] = true
	}
	p.forgetGrants(func(uid string) bool { return !podUIDs[uid] })
	// Remembered containers first, so that they keep their CPUs before
	// anything new is placed.
	known, unknown := splitRemembered(containers, remembered.Containers)
	for _, c := range known {
		p.restoreKnown(c, remembered.Containers[c.GetId()])
	}
	// Then the holds of pods that still exist, before anything new is
	// placed: a container restarted while the plugin was away gets its own.
	p.restoreHolds(remembered, pods, known)
	updates := p.adoptAll(unknown, pods)
	updates = append(updates, p.followPools(append(known, unknown...))...)
	p.rememberAssignments()
	if err := p.save(); err != nil {
		return nil, err
	}
	p.pinSandboxes()
	p.metrics.synchronized.Inc()
	p.log.Infof("synchronized: %d containers kept, %d placed, %d forgotten, %d CPU sets held for stopped containers, %d updates",
		len(known), len(unknown), p.countForgotten(remembered.Containers), len(p.memory.Held), len(updates))
	return updates, nil
}

// startOver empties the in-memory view: after a runtime restart it is as
// stale as the file. The pod sandboxes to pin are the runtime's.
func (p *Plugin) startOver(pods []*api.PodSandbox) {
	p.alloc = allocator.New(p.topo, p.alloc.Layout(), p.cfg.PinMemory)
	p.memory = NewState()
	p.pending = map[string]bool{} // Synchronize's updates cover every container
	p.sandbox = map[string]sandbox{}
	for _, pod := range pods {
		p.sandbox[pod.GetId()] = sandboxOf(pod)
	}
}

// restoreHolds re-adds the remembered holds of pods that still exist, and
// makes holds of remembered exclusive containers that stopped or vanished
// while the plugin was away (their exit code is unknown). Holds whose
// container runs again, or whose CPUs a running container took, end.
func (p *Plugin) restoreHolds(remembered *State, pods []*api.PodSandbox, running []*api.Container) {
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
		holds = append(holds, allocator.Hold{Assignment: assignmentFromState(h.ContainerID, h.ContainerState), ExitCode: h.ExitCode})
	}
	for _, id := range slices.Sorted(maps.Keys(remembered.Containers)) {
		if st := remembered.Containers[id]; !runs[id] && pools.IsExclusive(st.Pool) {
			holds = append(holds, allocator.Hold{Assignment: assignmentFromState(id, st)})
		}
	}
	holds = append(holds, p.migratePrevious(remembered.Previous, podUIDs)...)
	for _, h := range holds {
		who := fmt.Sprintf("%s/%s/%s", h.Pod.Namespace, h.Pod.Name, h.Container)
		if !podUIDs[h.Pod.UID] {
			p.log.Infof("synchronize: pod of stopped container %s is gone; CPUs %s released", who, h.Held())
			continue
		}
		if _, err := p.alloc.RestoreHold(h); err != nil {
			p.log.Warnf("synchronize: CPUs %s of stopped container %s no longer held: %v", h.Held(), who, err)
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
		cpus, err := cpuset.Parse(previous[key])
		if err != nil || cpus.IsEmpty() || !podUIDs[uid] {
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
func splitRemembered(containers []*api.Container, remembered map[string]ContainerState) (known, unknown []*api.Container) {
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

func sortContainers(cs []*api.Container) {
	slices.SortFunc(cs, func(a, b *api.Container) int { return strings.Compare(a.GetId(), b.GetId()) })
}

// adoptAll places the containers the state does not know and returns the
// updates that pin those that must move.
func (p *Plugin) adoptAll(unknown []*api.Container, pods []*api.PodSandbox) []*api.ContainerUpdate {
	podByID := map[string]*api.PodSandbox{}
	for _, pod := range pods {
		podByID[pod.GetId()] = pod
	}
	var updates []*api.ContainerUpdate
	for _, c := range unknown {
		pod := podByID[c.GetPodSandboxId()]
		if pod == nil {
			p.log.Warnf("synchronize: container %s has no pod sandbox; left alone", c.GetId())
			continue
		}
		if u := p.adoptUnknown(pod, c); u != nil {
			updates = append(updates, u)
		}
	}
	return updates
}

// followPools returns updates for shared and infra members that do not run
// on their pool as it is now.
func (p *Plugin) followPools(containers []*api.Container) []*api.ContainerUpdate {
	var updates []*api.ContainerUpdate
	for _, c := range containers {
		a, ok := p.alloc.Get(c.GetId())
		if !ok || pools.IsExclusive(a.Pool) {
			continue
		}
		if cur, ok := currentCPUs(c); !ok || !cur.Equals(a.CPUs) {
			updates = append(updates, cpuUpdate(a, p.cfg.PinMemory))
		}
	}
	return updates
}

// countForgotten counts the remembered containers the runtime no longer
// runs.
func (p *Plugin) countForgotten(remembered map[string]ContainerState) int {
	n := 0
	for id := range remembered {
		if _, ok := p.alloc.Get(id); !ok {
			n++
		}
	}
	return n
}

// restoreKnown re-adds a remembered container where the runtime says it
// runs. A conflict (e.g. the config changed) keeps it there and is reported.
func (p *Plugin) restoreKnown(c *api.Container, st ContainerState) {
	a := assignmentFromState(c.GetId(), st)
	if cur, ok := currentCPUs(c); ok && pools.IsExclusive(st.Pool) && !cur.Equals(a.CPUs) {
		p.log.Warnf("container %s/%s/%s runs on CPUs %s, the state said %s; keeping where it runs", st.PodNamespace, st.PodName, st.Container, cur, a.CPUs)
		a.CPUs = cur
	}
	if _, err := p.alloc.Restore(a, true); err != nil {
		p.log.Warnf("kept container %s/%s/%s on CPUs %s although %v", st.PodNamespace, st.PodName, st.Container, a.CPUs, err)
	}
}

// adoptUnknown handles a container the state does not know (created while
// the plugin was away, or the state was lost) and returns the update that
// pins it, if it must move.
func (p *Plugin) adoptUnknown(pod *api.PodSandbox, c *api.Container) *api.ContainerUpdate {
	info := p.toContainer(pod, c)
	who := fmt.Sprintf("%s/%s/%s", info.Pod.Namespace, info.Pod.Name, info.Name)
	if err := p.attachGrant(pod, c, &info); err != nil {
		p.log.Errorf("synchronize: container %s not pinned: %v", who, err)
		return nil
	}
	req, err := p.policy.Request(info, sysfs.DeviceNUMAResolver(p.cfg.SysfsRoot))
	if err != nil {
		p.log.Errorf("synchronize: container %s not pinned: %v", who, err)
		return nil
	}
	current, _ := currentCPUs(c)
	res, kept, err := p.alloc.Adopt(req, current)
	switch {
	case err != nil:
		p.log.Errorf("synchronize: container %s not pinned: %v", who, err)
		return nil
	case kept:
		p.log.Infof("synchronize: container %s stays on %s CPUs %s", who, req.Pool, current)
		if res.Assignment.NoCPUQuota && c.GetLinux().GetResources().GetCpu().GetQuota().GetValue() > 0 {
			u := cpuUpdate(res.Assignment, p.cfg.PinMemory)
			u.SetLinuxCPUQuota(noQuota)
			return u
		}
		return nil
	case pools.IsExclusive(req.Pool):
		p.log.Infof("synchronize: placed container %s on %s CPUs %s", who, req.Pool, res.Assignment.CPUs)
		u := cpuUpdate(res.Assignment, p.cfg.PinMemory)
		if res.Assignment.NoCPUQuota {
			u.SetLinuxCPUQuota(noQuota)
		}
		return u
	}
	return nil // shared/infra members are updated by the caller if needed
}

// RunPodSandbox pins the new pod's infra (pause) container to infra, since
// NRI cannot adjust sandboxes.
func (p *Plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	sb := sandboxOf(pod)
	p.sandbox[pod.GetId()] = sb
	p.pinSandbox(pod.GetId(), sb, p.alloc.PoolCPUs(pools.Infra))
	return nil
}

// StopPodSandbox ends the pod's life on this node: the kubelet stops a
// sandbox when the pod is deleted or has finished (for instance a
// restartPolicy Never pod whose containers all ended), which is when its
// CPU manager releases the pod's CPUs. The CPUs held for its stopped
// containers are released, and defensively those of any container the
// runtime did not report as stopped.
func (p *Plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.sandbox, pod.GetId())
	return p.releasePod(pod)
}

// RemovePodSandbox forgets the pod, as StopPodSandbox does (the runtime
// may remove a sandbox without stopping it first).
func (p *Plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.sandbox, pod.GetId())
	p.forgetGrantsOf(pod)
	return p.releasePod(pod)
}

// releasePod ends the holds and assignments of a pod whose sandbox stopped
// or was removed, unless another sandbox of the pod is known. Neither event
// can carry updates: infra members learn of a grown infra right after the
// handler returns.
func (p *Plugin) releasePod(pod *api.PodSandbox) error {
	for id, sb := range p.sandbox {
		if id != pod.GetId() && sb.uid != "" && sb.uid == pod.GetUid() {
			// The kubelet re-created the pod's sandbox and now stops or
			// removes the old one: the pod lives on in the new one.
			p.log.Debugf("pod %s/%s: old sandbox %s gone, the pod runs in sandbox %s", pod.GetNamespace(), pod.GetName(), pod.GetId(), id)
			return nil
		}
	}
	holds := len(p.alloc.HoldsOf(pod.GetUid()))
	released, res := p.alloc.ReleasePod(pod.GetUid())
	if holds == 0 && len(released) == 0 {
		return nil
	}
	for _, a := range released {
		p.recordRelease(allocator.Result{Assignment: a})
	}
	p.recordRelease(res)
	p.deferFollowers(res)
	p.log.Infof("pod %s/%s: sandbox gone, %d held CPU sets and %d containers released", pod.GetNamespace(), pod.GetName(), holds, len(released))
	return p.save()
}

// reapGoneSandboxes releases the holds of pods whose every known sandbox
// has lost its cgroup and that run no container: their sandbox stopped
// without the runtime saying so. containerd sends no StopPodSandbox or
// RemovePodSandbox for pods created before its own restart. It is called
// only before refusing a container, and returns the pods released.
func (p *Plugin) reapGoneSandboxes() int {
	running := map[string]bool{}
	for _, a := range p.alloc.Assignments() {
		running[a.Pod.UID] = true
	}
	bySandbox := map[string][]string{}
	for id, sb := range p.sandbox {
		bySandbox[sb.uid] = append(bySandbox[sb.uid], id)
	}
	released := 0
	for _, h := range p.alloc.Holds() {
		uid := h.Pod.UID
		if running[uid] || len(p.alloc.HoldsOf(uid)) == 0 {
			continue // running, or released with an earlier hold of the pod
		}
		gone := true
		for _, id := range bySandbox[uid] {
			gone = gone && p.pinner.Gone(p.sandbox[id].cgroupsPath)
		}
		if !gone {
			continue
		}
		for _, id := range bySandbox[uid] {
			delete(p.sandbox, id)
		}
		_, res := p.alloc.ReleasePod(uid)
		p.recordRelease(res)
		p.deferFollowers(res)
		p.log.Infof("pod %s/%s: sandbox gone without a stop from the runtime; CPUs held for its stopped containers released", h.Pod.Namespace, h.Pod.Name)
		released++
	}
	return released
}

// CreateContainer decides the container's pool and CPUs and returns the
// adjustment, plus updates for containers whose pool changed as a result.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	info := p.toContainer(pod, ctr)
	who := fmt.Sprintf("%s/%s/%s", info.Pod.Namespace, info.Pod.Name, info.Name)
	if err := p.attachGrant(pod, ctr, &info); err != nil {
		p.log.Errorf("refusing container %s: %v", who, err)
		p.metrics.countRefusal(refusedGrant)
		return nil, nil, fmt.Errorf("nri-cpupool: container %s: %w", who, err)
	}
	req, err := p.policy.Request(info, sysfs.DeviceNUMAResolver(p.cfg.SysfsRoot))
	if err != nil {
		p.log.Errorf("refusing container %s: %v", who, err)
		p.metrics.countRefusal(refusedAnnotation)
		return nil, nil, fmt.Errorf("nri-cpupool: container %s: %w", who, err)
	}
	holds := p.alloc.HoldsOf(req.Pod.UID)
	res, err := p.alloc.Allocate(req)
	if err != nil && pools.IsExclusive(req.Pool) && p.reapGoneSandboxes() > 0 {
		res, err = p.alloc.Allocate(req)
	}
	if err != nil {
		p.log.Errorf("refusing container %s: %v", who, err)
		p.metrics.countRefusal(refusedPlacement)
		return nil, nil, fmt.Errorf("nri-cpupool: %w", err)
	}
	p.recordPlacement(res)
	if err := p.save(); err != nil {
		// Without a durable record the CPUs could be handed out twice after
		// a restart: undo, give the pod back what it held, and refuse.
		p.recordRelease(p.alloc.Release(req.ID))
		for _, h := range holds {
			if _, err := p.alloc.RestoreHold(h); err != nil {
				p.log.Warnf("container %s: %v", who, err)
			}
		}
		p.metrics.countRefusal(refusedState)
		return nil, nil, fmt.Errorf("nri-cpupool: container %s not created: %w", who, err)
	}
	a := res.Assignment
	adj := &api.ContainerAdjustment{}
	adj.SetLinuxCPUSetCPUs(a.CPUs.String())
	if p.cfg.PinMemory && a.Mems.Size() > 0 {
		adj.SetLinuxCPUSetMems(a.Mems.String())
	}
	if a.NoCPUQuota {
		adj.SetLinuxCPUQuota(noQuota)
	}
	adj.AddEnv(EnvCPUs, a.CPUs.String())
	adj.AddEnv(EnvMems, a.Mems.String())
	adj.AddEnv(EnvPool, a.Pool)
	p.log.Infof("container %s: pool %s, CPUs %s, mems %s", who, a.Pool, a.CPUs, a.Mems)
	return adj, p.followers(res), nil
}

// followers converts a decision's side effects, and any pending ones, into
// updates and re-pins the sandboxes when infra changed.
func (p *Plugin) followers(res allocator.Result) []*api.ContainerUpdate {
	for _, u := range res.Updates {
		p.pending[u.ID] = true
	}
	if res.InfraChanged {
		p.log.Infof("infra is now %s: updating %d containers and %d sandboxes", p.alloc.PoolCPUs(pools.Infra), len(p.pending), len(p.sandbox))
		p.pinSandboxes()
	}
	return p.takePending()
}

// takePending turns the pending containers into updates with their
// current assignment.
func (p *Plugin) takePending() []*api.ContainerUpdate {
	var updates []*api.ContainerUpdate
	for _, id := range slices.Sorted(maps.Keys(p.pending)) {
		if a, ok := p.alloc.Get(id); ok {
			updates = append(updates, cpuUpdate(a, p.cfg.PinMemory))
		}
	}
	p.pending = map[string]bool{}
	return updates
}

// deferFollowers records side effects of a handler that cannot return
// updates and sends them once the handler has returned: calling
// UpdateContainers inside a handler would deadlock on the runtime's lock.
// On runtimes whose NRI can deadlock on any plugin-initiated update, they
// wait for the next reply instead. That is safe because a removal only
// ever grows the pools the updates concern: until then their members run
// on a subset of their pool, never on CPUs given to someone else.
func (p *Plugin) deferFollowers(res allocator.Result) {
	for _, u := range res.Updates {
		p.pending[u.ID] = true
	}
	if res.InfraChanged {
		p.pinSandboxes()
	}
	if len(p.pending) == 0 {
		return
	}
	if !p.runtime.pluginUpdatesSafe() {
		p.log.Debugf("%d container updates wait for the next reply (runtime NRI %s)", len(p.pending), p.runtime.nriVersion)
		return
	}
	go func() {
		p.mu.Lock()
		updates, send := p.takePending(), p.updater
		p.mu.Unlock()
		if len(updates) == 0 || send == nil {
			return
		}
		if failed, err := send(updates); err != nil || len(failed) > 0 {
			p.log.Warnf("updating %d containers after a removal: %v (failed: %d)", len(updates), err, len(failed))
		}
	}()
}

// UpdateContainer resizes a container whose CPU request changed (an
// in-place pod resize) and keeps a pinned container's cpuset when someone
// (the kubelet's static CPU manager, an operator) tries to change it.
func (p *Plugin) UpdateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.alloc.Get(ctr.GetId())
	if !ok {
		return nil, nil
	}
	if milli := milliOf(res.GetCpu()); milli > 0 && milli != a.MilliCPU {
		if _, granted, _ := grantToken(ctr.GetEnv()); granted && pools.IsExclusive(a.Pool) {
			// The kubelet counted cpupool.dev/exclusive devices, not the CPU
			// request: growing or shrinking the cpuset would part the
			// kubelet's accounting from the real CPUs.
			p.metrics.countResize(a.Pool, "refused")
			return nil, fmt.Errorf("nri-cpupool: container %s/%s/%s: resize to %dm refused: its CPUs %s are the %s devices the kubelet allocated; change the resource count (a new pod) instead",
				pod.GetNamespace(), pod.GetName(), ctr.GetName(), milli, a.CPUs, config.ResourceExclusive)
		}
		return p.resize(pod, ctr, a, milli)
	}
	// The kubelet sets a quota with every update; a lifted one stays lifted.
	quota := a.NoCPUQuota && res.GetCpu().GetQuota().GetValue() > 0
	override := false
	if want := res.GetCpu().GetCpus(); want != "" {
		set, err := cpuset.Parse(want)
		override = err != nil || !set.Equals(a.CPUs)
		if override && !p.overrode[a.ID] {
			p.overrode[a.ID] = true
			p.log.Warnf("container %s/%s/%s: keeping CPUs %s (%s pool) instead of the requested %s; set the kubelet's cpuManagerPolicy to none",
				pod.GetNamespace(), pod.GetName(), containerName(ctr), a.CPUs, a.Pool, want)
		}
	}
	if !override && !quota {
		return nil, nil
	}
	u := cpuUpdate(a, p.cfg.PinMemory)
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
	res := p.stop(ctr)
	delete(p.overrode, ctr.GetId())
	if err := p.save(); err != nil {
		return nil, err
	}
	return p.followers(res), nil
}

// RemoveContainer forgets a container. A removed container's held CPUs
// stay held: the kubelet removes dead containers (garbage collection,
// pruning of init containers) while their pod is active and may still run
// the container again. One removed without a stop is stopped here.
func (p *Plugin) RemoveContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.alloc.Get(ctr.GetId()); !ok {
		return nil
	}
	res := p.stop(ctr)
	p.deferFollowers(res)
	return p.save()
}

// stop ends a container's run; its exclusive CPUs stay held for its pod.
func (p *Plugin) stop(ctr *api.Container) allocator.Result {
	res := p.alloc.Stop(ctr.GetId(), exitCode(ctr))
	p.recordRelease(res)
	if a := res.Assignment; pools.IsExclusive(a.Pool) && a.Pod.UID != "" {
		p.log.Infof("container %s/%s/%s stopped: CPUs %s held for its pod until the pod sandbox stops", a.Pod.Namespace, a.Pod.Name, a.Container, a.Held())
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

// Shutdown is called when the runtime closes the connection.
func (p *Plugin) Shutdown(context.Context) {
	p.log.Info("runtime shut the connection down")
}

// sandbox is what pinning a pod's infra container needs. Sandboxes are not
// persisted: Synchronize lists them again after any restart.
type sandbox struct {
	uid, namespace, name, cgroupsPath string
	pid                               uint32
}

func sandboxOf(pod *api.PodSandbox) sandbox {
	return sandbox{uid: pod.GetUid(), namespace: pod.GetNamespace(), name: pod.GetName(), cgroupsPath: pod.GetLinux().GetCgroupsPath(), pid: pod.GetPid()}
}

func (p *Plugin) pinSandboxes() {
	infra := p.alloc.PoolCPUs(pools.Infra)
	for _, id := range slices.Sorted(maps.Keys(p.sandbox)) {
		p.pinSandbox(id, p.sandbox[id], infra)
	}
}

func (p *Plugin) pinSandbox(id string, sb sandbox, infra cpuset.CPUSet) {
	if !p.cfg.PinSandboxes {
		return
	}
	var mems cpuset.CPUSet
	if p.cfg.PinMemory {
		mems = p.topo.NUMANodesOf(infra)
	}
	err := p.pinner.Pin(sb.cgroupsPath, infra, mems)
	switch {
	case errors.Is(err, errNoCgroup):
		p.log.Debugf("pod %s/%s: sandbox %s has no cgroup to pin (%q)", sb.namespace, sb.name, id, sb.cgroupsPath)
	case err != nil:
		p.log.Warnf("pod %s/%s: pinning sandbox to infra %s: %v", sb.namespace, sb.name, infra, err)
	default:
		p.log.Debugf("pod %s/%s: sandbox pinned to infra %s", sb.namespace, sb.name, infra)
	}
	if p.cfg.SandboxAffinity && sb.pid > 0 {
		if err := setAffinity(sb.pid, infra); err != nil {
			p.log.Warnf("pod %s/%s: %v", sb.namespace, sb.name, err)
		}
	}
}

// recordPlacement remembers a placed container and every container the
// placement moved.
func (p *Plugin) recordPlacement(res allocator.Result) {
	p.memory.Containers[res.Assignment.ID] = containerState(res.Assignment)
	p.recordMoved(res)
}

// recordRelease forgets a released container and remembers every
// container the release moved.
func (p *Plugin) recordRelease(res allocator.Result) {
	delete(p.memory.Containers, res.Assignment.ID)
	p.recordMoved(res)
}

func (p *Plugin) recordMoved(res allocator.Result) {
	for _, u := range res.Updates {
		p.memory.Containers[u.ID] = containerState(u)
	}
	p.publishUsage()
}

// rememberAssignments rebuilds the memory of containers from the
// allocator, after Synchronize rebuilt the allocator from the runtime.
func (p *Plugin) rememberAssignments() {
	p.memory.Containers = map[string]ContainerState{}
	for _, a := range p.alloc.Assignments() {
		p.memory.Containers[a.ID] = containerState(a)
	}
	p.publishUsage()
}

// publishUsage hands the pools' usage to the metrics, which read it
// without the lock.
func (p *Plugin) publishUsage() { p.usage.publish(p.alloc.Usage()) }

func containerState(a allocator.Assignment) ContainerState {
	return ContainerState{PodUID: a.Pod.UID, PodNamespace: a.Pod.Namespace, PodName: a.Pod.Name, Container: a.Container,
		Pool: a.Pool, MilliCPU: a.MilliCPU, CPUs: a.CPUs.String(), Reserved: a.Reserved.String(), Mems: a.Mems.String(),
		Added: formatOrdered(a.Added), NoCPUQuota: a.NoCPUQuota}
}

// save writes the memory durably, with the allocator's holds for stopped
// containers and the pools as they are now.
func (p *Plugin) save() error {
	p.memory.Previous = map[string]string{} // read from older files only
	p.memory.Held = map[string]HeldState{}
	for _, h := range p.alloc.Holds() {
		p.memory.Held[h.Pod.UID+"/"+h.Container] = heldState(h)
	}
	p.memory.Pools = map[string]string{}
	for _, pool := range pools.Names() {
		p.memory.Pools[pool] = p.alloc.PoolCPUs(pool).String()
	}
	if err := p.store.Save(p.memory); err != nil {
		p.log.Errorf("saving state: %v", err)
		return fmt.Errorf("saving state: %w", err)
	}
	p.notify()
	return nil
}

func heldState(h allocator.Hold) HeldState {
	return HeldState{ContainerID: h.ID, ContainerState: containerState(h.Assignment), ExitCode: h.ExitCode}
}

func assignmentFromState(id string, st ContainerState) allocator.Assignment {
	parse := func(s string) cpuset.CPUSet {
		set, err := cpuset.Parse(s)
		if err != nil {
			return cpuset.New()
		}
		return set
	}
	return allocator.Assignment{ID: id, Pod: allocator.PodRef{Namespace: st.PodNamespace, Name: st.PodName, UID: st.PodUID},
		Container: st.Container, Pool: st.Pool, MilliCPU: st.MilliCPU, CPUs: parse(st.CPUs), Reserved: parse(st.Reserved), Mems: parse(st.Mems),
		Added: parseOrdered(st.Added), NoCPUQuota: st.NoCPUQuota}
}
