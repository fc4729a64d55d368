package plugin

// Containers that start across a Synchronize, or that it never sees. containerd (2.0 to 2.4 at
// least) creates a container's task, and with it its cgroup from the spec,
// before StartContainer blocks plugin synchronization, and marks the
// container running only after that. A Synchronize that falls in between
// lists the container as created; containerd applies the update the plugin
// returns for it to the stored spec only, since the container is not
// running, and the cgroup keeps the CPUs of the old spec. That happens to
// every container created while no plugin was registered (a restart, an
// upgrade) and started just as the plugin comes back.
//
// So the cgroups of the created containers whose CPUs Synchronize changed
// are checked in the background until they show their CPUs a few times in
// a row, and written through cgroupfs where they do not: the runtime's spec
// already says the same, so the two agree again.
//
// CRI-O has the converse gap: it lists a new container only after its
// CreateContainer hook, so one created while no plugin was registered can
// miss Synchronize altogether; PostStartContainer adopts it.

import (
	"context"
	"slices"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/pools"
)

const (
	// startCheckEvery paces the checks; startCheckFor bounds them: a
	// container that has not started by then starts from its updated spec.
	startCheckEvery = 100 * time.Millisecond
	startCheckFor   = 30 * time.Second
	// startCheckGood is how many checks in a row must find the CPUs right:
	// the runtime may still be writing the cgroup of a task it creates.
	startCheckGood = 3
)

// startCheck is a created container whose cgroup is checked.
type startCheck struct {
	id, cgroupsPath string
	good            int
}

// createdWithUpdates picks the created containers whose CPUs an update
// changes, with a cgroup path to check.
func createdWithUpdates(containers []*api.Container, updates []*api.ContainerUpdate) []*startCheck {
	updated := make(map[string]bool, len(updates))
	for _, u := range updates {
		if u.GetLinux().GetResources().GetCpu().GetCpus() != "" {
			updated[u.GetContainerId()] = true
		}
	}
	var out []*startCheck
	for _, c := range containers {
		if c.GetState() == api.ContainerState_CONTAINER_CREATED && updated[c.GetId()] && c.GetLinux().GetCgroupsPath() != "" {
			out = append(out, &startCheck{id: c.GetId(), cgroupsPath: c.GetLinux().GetCgroupsPath()})
		}
	}
	return out
}

// checkStartsLater checks the cgroups of checks in the background. Called
// with the lock held.
func (p *Plugin) checkStartsLater(checks []*startCheck) {
	if len(checks) == 0 || p.pins.stopped {
		return
	}
	quit := p.pins.quit
	proflabel.Go(proflabel.StartCheck, func() {
		t := time.NewTicker(startCheckEvery)
		defer t.Stop()
		deadline := time.Now().Add(startCheckFor)
		for len(checks) > 0 && time.Now().Before(deadline) {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			checks = slices.DeleteFunc(checks, p.checkStart)
		}
	})
}

// checkStart checks one container's cgroup, and pins it if its CPUs are
// not the container's; true once it needs no more checks.
func (p *Plugin) checkStart(c *startCheck) bool {
	p.mu.Lock()
	a, ok := p.alloc.Get(c.id)
	pinner, pinMemory := p.pinner, p.cfg.PinMemory
	// What the container was sent: its record less the CPUs offline now
	// (runnable). A cgroup pinned exactly so is right, and writing it the
	// offline ones would fail on cgroup v1 (EINVAL) at every check.
	var want cpuset.CPUSet
	if ok {
		want = runnable(a.Cpuset(), p.topo.Online)
	}
	p.mu.Unlock()
	if !ok {
		return true // removed, or placed again by a later Synchronize
	}
	got, err := pinner.CPUs(c.cgroupsPath)
	if err != nil {
		return false // no task yet
	}
	if got.Equals(want) {
		c.good++
		return c.good >= startCheckGood
	}
	c.good = 0
	mems := cpuset.New()
	if pinMemory {
		mems = a.Mems
	}
	who := a.Pod.ContainerName(a.Container)
	if err := pinner.Pin(c.cgroupsPath, want, mems); err != nil {
		p.log.Warnf("container %s started on CPUs %q, not its %s, from a spec the plugin had not adjusted; writing its cgroup failed: %v",
			who, got.String(), want.String(), err)
		return false
	}
	p.metrics.startRepins.Inc()
	p.log.Warnf("container %s started on CPUs %q, not its %s, from a spec the plugin had not adjusted; its cgroup is pinned now",
		who, got.String(), want.String())
	return false
}

// PostStartContainer adopts a container that started without the plugin
// having seen it, as Synchronize adopts the containers created while no
// plugin was registered. CRI-O records a new container in the list that
// Synchronize gets only after the container's CreateContainer hook: one
// created while no plugin was registered and recorded just after a
// plugin's Synchronize is seen by neither, and its start is the first the
// plugin hears of it. Its cgroup is pinned now (in the background, as
// above), and its CPUs, and those of the pool members the adoption moved,
// go to the runtime with the next reply.
func (p *Plugin) PostStartContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.synced {
		return nil
	}
	if _, ok := p.alloc.Get(ctr.GetId()); ok || p.ended.has(ctr.GetId()) {
		return nil
	}
	infra := p.alloc.PoolCPUs(pools.Infra)
	p.adoptUnknown(pod, ctr)
	a, ok := p.alloc.Get(ctr.GetId())
	if !ok {
		return nil
	}
	p.alloc.FollowShared()
	p.pending[a.ID] = true
	if !p.alloc.PoolCPUs(pools.Infra).Equals(infra) {
		// An exclusive-non-isolcpus container took infra CPUs: its
		// members follow, as after a creation.
		for _, m := range p.alloc.Assignments() {
			if !pools.IsExclusive(m.Pool) || m.WithShared {
				p.pending[m.ID] = true
			}
		}
		p.pinSandboxesLater()
	}
	p.rememberAssignments()
	p.rememberCgroup(a, ctr)
	p.stateChanged()
	p.log.Warnf("container %s started without the plugin seeing its creation (created while no plugin was registered, listed by the runtime only after the plugin's Synchronize); adopted into pool %s on CPUs %s",
		containerRef(pod, ctr), a.Pool, a.Cpuset().String())
	if path := ctr.GetLinux().GetCgroupsPath(); path != "" {
		p.checkStartsLater([]*startCheck{{id: a.ID, cgroupsPath: path}})
	}
	return nil
}

// endedRuns remembers the ids of the last containers that stopped or were
// removed, so that a PostStartContainer that arrives after its container's
// stop (a container that exits at once: the runtime may handle its exit
// before it sends the start's post event) does not adopt a dead container,
// whose assignment would hold CPUs until the next Synchronize. Bounded: a
// post event comes right after its start, long before thousands of other
// containers end.
type endedRuns struct {
	ids  map[string]bool
	ring []string
	next int
}

const endedRunsKept = 4096

func (e *endedRuns) add(id string) {
	if e.ids == nil {
		e.ids, e.ring = map[string]bool{}, make([]string, endedRunsKept)
	}
	if e.ids[id] {
		return
	}
	if old := e.ring[e.next]; old != "" {
		delete(e.ids, old)
	}
	e.ring[e.next], e.ids[id] = id, true
	e.next = (e.next + 1) % endedRunsKept
}

func (e *endedRuns) has(id string) bool { return e.ids[id] }
