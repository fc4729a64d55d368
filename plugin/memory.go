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
	"github.com/cpupool/nri-cpupool/internal/cpulist"
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
	// before the first Synchronize; synced, that a Synchronize has
	// reconciled it.
	loaded, synced bool
	// memory is what survives a restart, in the state file's form: read
	// from the file, then kept equal to the allocator's assignments by each
	// decision (recordPlacement, recordRelease), so that a write does not
	// re-derive them. The writer persists it (with the holds and pools,
	// which it takes from the allocator) in the background. Synchronize
	// reconciles it with the runtime.
	memory *State
	// gen counts changes to memory, the allocator's holds and the pools;
	// dirty are the containers changed since the writer last collected
	// them (all of them after Synchronize: dirtyAll).
	gen      uint64
	dirty    map[string]bool
	dirtyAll bool
	// writer persists the state in the background, off the reply path.
	writer *stateWriter
	// sandbox are the pod sandboxes to keep pinned to infra, by id, and
	// podSandboxes counts them by pod UID, so that a sandbox's stop asks
	// whether its pod lives on without a walk over every pod; both change
	// through addSandbox and dropSandbox only.
	sandbox      map[string]sandbox
	podSandboxes map[string]int
	pins         sandboxPins // pins them in the background (sandboxpins.go)
	// localities are device NUMA nodes already found (devices.go).
	localities localityCache
	overrode   map[string]bool // containers whose cpuset change we refused, logged once
	metrics    *metrics
	// usage is the pools' usage for the metrics, published by the state
	// writer's collection (a few milliseconds after a decision) rather
	// than by each decision: computing it walks every container and CPU,
	// which the reply path cannot afford.
	usage usageSnapshot
	// pending are containers whose cpuset changed in a handler that cannot
	// return updates (RemoveContainer, RemovePodSandbox); the next reply
	// carries them (see deferFollowers).
	pending map[string]bool
	// runtime is what the connected runtime said about itself (for
	// cpupool_runtime_info).
	runtime runtimeInfo
	// nriVersion reports the runtime's NRI version on the current
	// connection (the NRI stub's view); set by Run. assumeNRIVersion, if
	// set, replaces it (tests play old runtimes with today's NRI library).
	nriVersion       func() string
	assumeNRIVersion string
	// afterPersist, when set (by tests), runs after a handler has recorded
	// its decision and before it replies: where a crash hurts most.
	afterPersist func(event, id string)
	// grants are the kubelet's allocations of cpupool.dev/exclusive;
	// changed tells the device plugin to re-read the devices.
	grants  *grants
	changed chan struct{}
}

// New builds a plugin for a node. The state is loaded here; it is
// reconciled with the runtime in Synchronize.
func New(cfg *config.Config, topo *sysfs.Topology, store Store, log *logrus.Logger) (*Plugin, error) {
	p := &Plugin{topo: topo, store: store, log: log, memory: NewState(), sandbox: map[string]sandbox{}, podSandboxes: map[string]int{}, overrode: map[string]bool{},
		dirty: map[string]bool{}, pending: map[string]bool{}, changed: make(chan struct{}, 1)}
	p.pins = newSandboxPins(&p.mu)
	p.localities = localityCache{}
	p.writer = newStateWriter(log, p.collectState)
	p.metrics = newMetrics(&p.usage, p.writer)
	g, err := loadGrants(GrantsFile(cfg.StateFile))
	if err != nil {
		return nil, err
	}
	g.file.removeStaleTemps() // nothing writes it yet
	p.grants = g
	if err := p.configure(cfg); err != nil {
		return nil, err
	}
	return p, nil
}

// loadState reads the state once, before the first Synchronize: late, so
// that a runtime-launched plugin can take its state file from the runtime's
// configuration. Then the writer starts on that store.
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
	p.writer.start(p.store, p.grants.file)
	if st.MigratedFrom != 0 {
		p.log.Infof("state: %s is schema version %d; migrated to %d, rewritten at the next write", p.cfg.StateFile, st.MigratedFrom, SchemaVersion)
	}
	p.log.Infof("state: %d containers remembered, to reconcile with the runtime", len(st.Containers))
	return nil
}

// Flush writes every decision made so far to the state file and makes it
// durable, now. It must not be called with the lock held.
func (p *Plugin) Flush() error {
	return p.writer.Flush()
}

// Close writes the last decisions, stops the writer and releases the state
// store's resources. It must not be called with the lock held: the final
// write collects the state under it.
func (p *Plugin) Close() {
	p.stopPinning()
	if err := p.writer.Close(); err != nil {
		p.log.Errorf("final state write: %v", err)
	}
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
	p.policy = allocator.NewPolicy(cfg, p.topo)
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
	p.log.Infof("connected to %s %s (NRI %s)", runtime, version, p.runtime.nriVersion)
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
	if p.synced {
		// The runtime reconnected: memory is newer than the file, and the
		// holds live in the allocator.
		p.rememberHolds()
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
	var repair []*api.Container
	for _, c := range known {
		if !p.restoreKnown(c, remembered.Containers[c.GetId()]) {
			repair = append(repair, c)
		}
	}
	// Then the holds of pods that still exist, before anything new is
	// placed: a container restarted while the plugin was away gets its own.
	p.restoreHolds(remembered, pods, known)
	// Containers that do not run where they should (the runtime created
	// them without our adjustment, or on CPUs this node lacks) are pinned
	// again once every container that runs correctly, and every hold, has
	// its CPUs.
	updates, confined := p.repairAll(repair, remembered.Containers, pods)
	adopted, confinedNew := p.adoptAll(unknown, pods)
	updates = append(updates, adopted...)
	updates = append(updates, p.followPools(append(known, unknown...))...)
	p.rememberAssignments()
	p.synced = true
	p.stateChanged()
	p.pinSandboxesLater()
	p.metrics.synchronized.Inc()
	p.log.Infof("synchronized: %d containers kept, %d re-pinned, %d placed, %d confined, %d forgotten, %d CPU sets held for stopped containers, %d updates",
		len(known)-len(repair), len(repair), len(unknown), confined+confinedNew, p.countForgotten(remembered.Containers), len(p.alloc.Holds()), len(updates))
	return updates, nil
}

// startOver empties the in-memory view: after a runtime restart it is as
// stale as the file. The pod sandboxes to pin are the runtime's.
func (p *Plugin) startOver(pods []*api.PodSandbox) {
	p.alloc = allocator.New(p.topo, p.alloc.Layout(), p.cfg.PinMemory)
	p.memory = NewState()
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

// containerRef names a container in log lines and errors, the one way
// (allocator.PodRef.ContainerName): namespace/pod/container.
func containerRef(pod *api.PodSandbox, ctr *api.Container) string {
	return podRef(pod).ContainerName(containerName(ctr))
}

// podRef is the allocator's reference to a pod.
func podRef(pod *api.PodSandbox) allocator.PodRef {
	return allocator.PodRef{Namespace: pod.GetNamespace(), Name: pod.GetName(), UID: pod.GetUid()}
}

func sortContainers(cs []*api.Container) {
	slices.SortFunc(cs, func(a, b *api.Container) int { return strings.Compare(a.GetId(), b.GetId()) })
}

// adoptAll places the containers the state does not know and returns the
// updates that pin those that must move, and how many were confined.
func (p *Plugin) adoptAll(unknown []*api.Container, pods []*api.PodSandbox) ([]*api.ContainerUpdate, int) {
	podByID := podsByID(pods)
	var updates []*api.ContainerUpdate
	confined := 0
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
// keep where they run, and counts those it had to confine.
func (p *Plugin) repairAll(repair []*api.Container, remembered map[string]ContainerState, pods []*api.PodSandbox) ([]*api.ContainerUpdate, int) {
	podByID := podsByID(pods)
	var updates []*api.ContainerUpdate
	confined := 0
	for _, c := range repair {
		u, ok := p.repairKnown(podByID[c.GetPodSandboxId()], c, remembered[c.GetId()])
		if u != nil {
			updates = append(updates, u)
		}
		if !ok {
			confined++
		}
	}
	return updates, confined
}

func podsByID(pods []*api.PodSandbox) map[string]*api.PodSandbox {
	m := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		m[pod.GetId()] = pod
	}
	return m
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
		if cur, pinned := p.runtimeCPUs(c); !pinned || !cpulist.Equal(cur, a.CPUs) {
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
// runs, if that is a place it may run: its remembered CPUs, or another
// whole set of its pool that nobody else holds. A conflict with the
// configuration (e.g. the pool changed) keeps it there and is reported. It
// returns false, having added nothing, when the container must be pinned
// again (see repairKnown).
func (p *Plugin) restoreKnown(c *api.Container, st ContainerState) bool {
	a, clean := p.assignmentFromState(c.GetId(), st)
	who := fmt.Sprintf("%s/%s/%s", st.PodNamespace, st.PodName, st.Container)
	if !pools.IsExclusive(st.Pool) {
		// Shared and infra members follow their pool; the caller updates
		// them if they run elsewhere.
		if _, err := p.alloc.Restore(a, true); err != nil {
			p.log.Warnf("kept container %s in pool %s although %v", who, st.Pool, err)
		}
		return true
	}
	cur, pinned := p.runtimeCPUs(c)
	switch {
	case !pinned || !clean:
		return false
	case !p.alloc.HeldByOthers(a.Held(), a.ID).IsEmpty():
		// Two containers on one exclusive CPU: the first keeps it.
		return false
	case cpulist.Equal(cur, a.CPUs):
		if _, err := p.alloc.Restore(a, true); err != nil {
			p.log.Warnf("kept container %s on CPUs %s although %v", who, a.CPUs, err)
		}
		return true
	case cur.Size() == a.CPUs.Size():
		moved := a
		moved.CPUs = cur
		if !a.Reserved.IsEmpty() {
			moved.Reserved = p.alloc.HiddenSiblings(cur)
		}
		if _, err := p.alloc.Restore(moved, false); err == nil {
			p.log.Warnf("container %s runs on CPUs %s, the state said %s; keeping where it runs", who, cur, a.CPUs)
			return true
		}
	}
	return false
}

// repairKnown pins a remembered exclusive container that does not run
// where it may: back on its remembered CPUs when they are free, else placed
// anew, else confined to infra. ok is false when it was confined.
func (p *Plugin) repairKnown(pod *api.PodSandbox, c *api.Container, st ContainerState) (*api.ContainerUpdate, bool) {
	a, clean := p.assignmentFromState(c.GetId(), st)
	who := fmt.Sprintf("%s/%s/%s", st.PodNamespace, st.PodName, st.Container)
	cur, pinned := p.runtimeCPUs(c)
	runs := "every CPU"
	if pinned {
		runs = "CPUs " + cur.String()
	}
	if clean {
		if _, err := p.alloc.Restore(a, false); err == nil {
			p.log.Warnf("synchronize: container %s runs on %s, not on its CPUs %s; pinned again", who, runs, a.CPUs)
			return cpuUpdate(a, p.cfg.PinMemory), true
		}
	}
	if pod == nil {
		return p.confine(c, who, fmt.Errorf("its pod sandbox is gone"))
	}
	p.log.Warnf("synchronize: container %s runs on %s and its CPUs %s cannot be restored; placing it again", who, runs, st.CPUs)
	return p.adoptUnknown(pod, c)
}

// adoptUnknown handles a container the state does not know (created while
// the plugin was away, or the state was lost) and returns the update that
// pins it, if it must move. A container it cannot place is confined to
// infra (ok false): left alone it would run on every CPU, exclusive ones
// included.
func (p *Plugin) adoptUnknown(pod *api.PodSandbox, c *api.Container) (*api.ContainerUpdate, bool) {
	if pod == nil {
		return p.confine(c, c.GetId(), fmt.Errorf("it has no pod sandbox"))
	}
	who := containerRef(pod, c)
	if err := allocator.CheckAnnotations(pod.GetAnnotations()); err != nil {
		return p.confine(c, who, err)
	}
	info := p.toContainer(pod, c)
	if err := p.attachGrant(pod, c, &info); err != nil {
		return p.confine(c, who, err)
	}
	req, err := p.policy.Request(info, p.resolveDeviceNUMA)
	if err != nil {
		return p.confine(c, who, err)
	}
	current, pinned := p.runtimeCPUs(c)
	if !pinned {
		current = cpuset.New()
	}
	res, kept, err := p.alloc.Adopt(req, current)
	switch {
	case err != nil:
		return p.confine(c, who, err)
	case kept:
		p.log.Infof("synchronize: container %s stays on %s CPUs %s", who, req.Pool, current)
		if res.Assignment.NoCPUQuota && c.GetLinux().GetResources().GetCpu().GetQuota().GetValue() > 0 {
			u := cpuUpdate(res.Assignment, p.cfg.PinMemory)
			u.SetLinuxCPUQuota(noQuota)
			return u, true
		}
		return nil, true
	case pools.IsExclusive(req.Pool):
		p.log.Infof("synchronize: placed container %s on %s CPUs %s", who, req.Pool, res.Assignment.CPUs)
		u := cpuUpdate(res.Assignment, p.cfg.PinMemory)
		if res.Assignment.NoCPUQuota {
			u.SetLinuxCPUQuota(noQuota)
		}
		return u, true
	}
	return nil, true // shared/infra members are updated by the caller if needed
}

// confine puts a container Synchronize cannot place into infra, where it
// overlaps no exclusive CPU, and says why.
func (p *Plugin) confine(c *api.Container, who string, reason error) (*api.ContainerUpdate, bool) {
	p.metrics.countRefusal(refusedSynchronize)
	var pod allocator.PodRef
	if st, ok := p.memory.Containers[c.GetId()]; ok {
		pod = allocator.PodRef{Namespace: st.PodNamespace, Name: st.PodName, UID: st.PodUID}
	}
	_, err := p.alloc.Allocate(allocator.Request{ID: c.GetId(), Pod: pod, Container: c.GetName(), Pool: pools.Infra,
		NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()})
	if err != nil {
		p.log.Errorf("synchronize: container %s cannot be placed (%v) nor confined to infra: %v", who, reason, err)
		return nil, false
	}
	p.log.Errorf("synchronize: container %s confined to infra: %v", who, reason)
	return nil, false // the caller updates infra members
}

// RunPodSandbox pins the new pod's infra (pause) container to infra, since
// NRI cannot adjust sandboxes.
func (p *Plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addSandbox(pod)
	p.pinSandboxLater(pod.GetId())
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
	p.dropSandbox(pod.GetId())
	return p.releasePod(pod)
}

// RemovePodSandbox forgets the pod, as StopPodSandbox does (the runtime
// may remove a sandbox without stopping it first).
func (p *Plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropSandbox(pod.GetId())
	p.forgetGrantsOf(pod)
	return p.releasePod(pod)
}

// releasePod ends the holds and assignments of a pod whose sandbox stopped
// or was removed, unless another sandbox of the pod is known. Neither event
// can carry updates: infra members learn of a grown infra right after the
// handler returns.
func (p *Plugin) releasePod(pod *api.PodSandbox) error {
	if p.podLivesOn(pod) {
		// The kubelet re-created the pod's sandbox and now stops or
		// removes the old one: the pod lives on in the new one.
		p.log.Debugf("pod %s/%s: old sandbox %s gone, the pod runs in another sandbox", pod.GetNamespace(), pod.GetName(), pod.GetId())
		return nil
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
	p.stateChanged()
	return nil
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
			p.dropSandbox(id)
		}
		_, res := p.alloc.ReleasePod(uid)
		p.recordRelease(res)
		p.deferFollowers(res)
		p.log.Infof("pod %s/%s: sandbox gone without a stop from the runtime; CPUs held for its stopped containers released", h.Pod.Namespace, h.Pod.Name)
		released++
	}
	if released > 0 {
		p.stateChanged()
	}
	return released
}

// CreateContainer decides the container's pool and CPUs and returns the
// adjustment, plus updates for containers whose pool changed as a result.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	who := containerRef(pod, ctr)
	// Tenant input is bounded before it can hold the lock that every
	// other container waits for.
	if err := allocator.CheckAnnotations(pod.GetAnnotations()); err != nil {
		p.log.Errorf("refusing container %s: %v", who, err)
		p.metrics.countRefusal(refusedAnnotation)
		return nil, nil, fmt.Errorf("nri-cpupool: container %s: %w", who, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.alloc.Get(ctr.GetId()); ok {
		// A repeated event (after a reconnect): answer the same, record
		// nothing, and never undo what an earlier call decided.
		st := containerState(a)
		p.log.Infof("container %s: already placed in pool %s on CPUs %s", who, a.Pool, st.CPUs)
		return p.adjustment(st), p.takePending(), nil
	}
	info := p.toContainer(pod, ctr)
	if err := p.attachGrant(pod, ctr, &info); err != nil {
		p.log.Errorf("refusing container %s: %v", who, err)
		p.metrics.countRefusal(refusedGrant)
		return nil, nil, fmt.Errorf("nri-cpupool: container %s: %w", who, err)
	}
	req, err := p.policy.Request(info, p.resolveDeviceNUMA)
	if err != nil {
		p.log.Errorf("refusing container %s: %v", who, err)
		p.metrics.countRefusal(refusedAnnotation)
		return nil, nil, fmt.Errorf("nri-cpupool: container %s: %w", who, err)
	}
	res, err := p.alloc.Allocate(req)
	if err != nil && pools.IsExclusive(req.Pool) && p.reapGoneSandboxes() > 0 {
		res, err = p.alloc.Allocate(req)
	}
	if err != nil {
		p.log.Errorf("refusing container %s: %v", who, err)
		p.metrics.countRefusal(refusedPlacement)
		return nil, nil, fmt.Errorf("nri-cpupool: %w", err)
	}
	// The reply does not wait for the state file: the writer persists the
	// decision in the background, and if this process dies before it does,
	// the next Synchronize finds the container where the runtime runs it.
	st := p.recordPlacement(res)
	p.stateChanged()
	p.log.Infof("container %s: pool %s, CPUs %s, mems %s", who, st.Pool, st.CPUs, st.Mems)
	updates := p.followers(res)
	p.persistedHook("CreateContainer", ctr.GetId())
	return p.adjustment(st), updates, nil
}

// adjustment pins a new container to its assignment, from its record (the
// CPU lists already written out).
func (p *Plugin) adjustment(st ContainerState) *api.ContainerAdjustment {
	adj := &api.ContainerAdjustment{}
	adj.SetLinuxCPUSetCPUs(st.CPUs)
	if p.cfg.PinMemory && st.Mems != "" {
		adj.SetLinuxCPUSetMems(st.Mems)
	}
	if st.NoCPUQuota {
		adj.SetLinuxCPUQuota(noQuota)
	}
	adj.AddEnv(EnvCPUs, st.CPUs)
	adj.AddEnv(EnvMems, st.Mems)
	adj.AddEnv(EnvPool, st.Pool)
	return adj
}

// persistedHook runs the test hook, if any, between a decision (recorded in
// memory; the writer persists it in the background) and
// its reply: the window in which a crash leaves the runtime without the
// reply while the state file already has the decision.
func (p *Plugin) persistedHook(event, id string) {
	if p.afterPersist != nil {
		p.afterPersist(event, id)
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
			updates = append(updates, cpuUpdate(a, p.cfg.PinMemory))
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
// subset of their pool, never on a CPU someone else holds. Sandboxes follow
// without waiting for a reply: the pinner takes them at once.
func (p *Plugin) deferFollowers(res allocator.Result) {
	for _, u := range res.Updates {
		p.pending[u.ID] = true
	}
	if res.InfraChanged {
		p.pinSandboxesLater()
	}
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
			return nil, fmt.Errorf("nri-cpupool: container %s: resize to %dm refused: its CPUs %s are the %s devices the kubelet allocated; change the resource count (a new pod) instead",
				a.Pod.ContainerName(a.Container), milli, a.CPUs, config.ResourceExclusive)
		}
		return p.resize(pod, ctr, a, milli)
	}
	// The kubelet sets a quota with every update; a lifted one stays lifted.
	quota := a.NoCPUQuota && res.GetCpu().GetQuota().GetValue() > 0
	override := false
	if want := res.GetCpu().GetCpus(); want != "" {
		set, err := cpulist.Parse(want)
		override = err != nil || !cpulist.Equal(set, a.CPUs)
		if override && !p.overrode[a.ID] {
			p.overrode[a.ID] = true
			p.log.Warnf("container %s: keeping CPUs %s (%s pool) instead of the requested %s; set the kubelet's cpuManagerPolicy to none",
				containerRef(pod, ctr), a.CPUs, a.Pool, cpulist.Echo(want))
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
	p.stateChanged()
	updates := p.followers(res)
	p.persistedHook("StopContainer", ctr.GetId())
	return updates, nil
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
	p.stateChanged()
	return nil
}

// stop ends a container's run; its exclusive CPUs stay held for its pod.
func (p *Plugin) stop(ctr *api.Container) allocator.Result {
	res := p.alloc.Stop(ctr.GetId(), exitCode(ctr))
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

// Shutdown is called when the runtime closes the connection (it is
// stopping, perhaps with the node): the state file is brought up to date.
func (p *Plugin) Shutdown(context.Context) {
	p.log.Info("runtime shut the connection down")
	if err := p.Flush(); err != nil {
		p.log.Errorf("writing state at shutdown: %v", err)
	}
}

// recordPlacement remembers a placed container and every container the
// placement moved.
func (p *Plugin) recordPlacement(res allocator.Result) ContainerState {
	st := containerState(res.Assignment)
	p.memory.Containers[res.Assignment.ID] = st
	p.dirty[res.Assignment.ID] = true
	p.recordMoved(res)
	return st
}

// recordRelease forgets a released container and remembers every
// container the release moved.
func (p *Plugin) recordRelease(res allocator.Result) {
	delete(p.memory.Containers, res.Assignment.ID)
	p.dirty[res.Assignment.ID] = true
	p.recordMoved(res)
}

func (p *Plugin) recordMoved(res allocator.Result) {
	for _, u := range res.Updates {
		p.memory.Containers[u.ID] = containerState(u)
		p.dirty[u.ID] = true
	}
}

// rememberAssignments rebuilds the memory of containers from the
// allocator, after Synchronize rebuilt the allocator from the runtime.
func (p *Plugin) rememberAssignments() {
	p.memory.Containers = map[string]ContainerState{}
	for _, a := range p.alloc.Assignments() {
		p.memory.Containers[a.ID] = containerState(a)
	}
	p.dirtyAll = true
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

// stateChanged tells the writer that memory moved on (it persists the
// change in the background) and the device plugin that the devices may
// have. Called under the lock, after the record operations.
func (p *Plugin) stateChanged() {
	p.gen++
	p.writer.changed(p.gen)
	p.notify()
}

// collectState brings the writer's copy of the state up to date, under the
// lock: only the containers changed since the last call are copied, so the
// lock is held for the size of the change, not of the node (plus the
// holds and the pools' usage, which it publishes for the metrics), and
// the grants when they changed. It returns the generation the copy now
// holds.
func (p *Plugin) collectState(st *State, grants *grantsSnapshot) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if grants.gen != p.grants.gen {
		*grants = p.grants.snapshot()
	}
	if p.dirtyAll {
		st.Containers = maps.Clone(p.memory.Containers)
		p.dirtyAll = false
	} else {
		for id := range p.dirty {
			if c, ok := p.memory.Containers[id]; ok {
				st.Containers[id] = c
			} else {
				delete(st.Containers, id)
			}
		}
	}
	clear(p.dirty)
	clear(st.Previous) // read from older files only
	clear(st.Held)
	for _, h := range p.alloc.Holds() {
		st.Held[h.Pod.UID+"/"+h.Container] = heldState(h)
	}
	usage := p.alloc.Usage()
	p.usage.publish(usage)
	for _, u := range usage {
		st.Pools[u.Pool] = p.alloc.PoolCPUs(u.Pool).String()
	}
	return p.gen
}

// rememberHolds copies the allocator's holds into memory, for a
// Synchronize after a runtime restart.
func (p *Plugin) rememberHolds() {
	p.memory.Previous = map[string]string{}
	p.memory.Held = map[string]HeldState{}
	for _, h := range p.alloc.Holds() {
		p.memory.Held[h.Pod.UID+"/"+h.Container] = heldState(h)
	}
}

func heldState(h allocator.Hold) HeldState {
	return HeldState{ContainerID: h.ID, ContainerState: containerState(h.Assignment), ExitCode: h.ExitCode}
}

// assignmentFromState reads a remembered assignment. clean is false when a
// set was malformed or named CPUs this node does not have (dropped, with a
// warning): the container must then be pinned again.
func (p *Plugin) assignmentFromState(id string, st ContainerState) (allocator.Assignment, bool) {
	what := fmt.Sprintf("state of container %s/%s/%s", st.PodNamespace, st.PodName, st.Container)
	cpus, ok1 := p.nodeCPUs(st.CPUs, what+", cpus")
	reserved, ok2 := p.nodeCPUs(st.Reserved, what+", reserved")
	mems, err := cpulist.Parse(st.Mems)
	if err != nil {
		mems = cpuset.New()
	}
	return allocator.Assignment{ID: id, Pod: allocator.PodRef{Namespace: st.PodNamespace, Name: st.PodName, UID: st.PodUID},
		Container: st.Container, Pool: st.Pool, MilliCPU: st.MilliCPU, CPUs: cpus, Reserved: reserved, Mems: mems,
		Added: addedWithin(parseOrdered(st.Added), cpus), NoCPUQuota: st.NoCPUQuota}, ok1 && ok2
}

// addedWithin keeps the remembered order of added CPUs only for CPUs the
// assignment has: the file may name CPUs this node lacks.
func addedWithin(ids []int, cpus cpuset.CPUSet) []int {
	var out []int
	for _, id := range ids {
		if cpus.Contains(id) {
			out = append(out, id)
		}
	}
	return out
}

// nodeCPUs parses a CPU list from the state file or the runtime, bounded,
// and drops the CPUs this node does not have online (a state file from
// another node, a hot-unplugged vCPU), saying so. clean is false if the
// list was malformed or anything was dropped.
func (p *Plugin) nodeCPUs(s, what string) (cpuset.CPUSet, bool) {
	set, err := cpulist.Parse(s)
	if err != nil {
		p.log.Warnf("%s: %v; ignored", what, err)
		return cpuset.New(), false
	}
	if unknown := p.alloc.Unknown(set); !unknown.IsEmpty() {
		p.log.Warnf("%s: CPUs %s are not on this node; dropped", what, unknown)
		return set.Difference(unknown), false
	}
	return set, true
}

// runtimeCPUs is the cpuset the runtime reports for a container. pinned is
// false when the container may run on every CPU: no cpuset (the runtime
// created it without our adjustment), a malformed one, or one naming CPUs
// this node does not have.
func (p *Plugin) runtimeCPUs(c *api.Container) (cpuset.CPUSet, bool) {
	s := c.GetLinux().GetResources().GetCpu().GetCpus()
	if s == "" {
		return cpuset.New(), false
	}
	set, clean := p.nodeCPUs(s, "runtime's cpuset of container "+c.GetId())
	return set, clean && !set.IsEmpty()
}
