package plugin

// What the plugin remembers across restarts: the record of each decision,
// kept equal to the allocator's assignments, and its collection by the
// background writer.

import (
	"maps"
	"slices"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/state"
)

// recordPlacement remembers a placed container and every container the
// placement moved.
func (p *Plugin) recordPlacement(res allocator.Result) state.ContainerState {
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
	p.memory.Containers = map[string]state.ContainerState{}
	for _, a := range p.alloc.Assignments() {
		p.memory.Containers[a.ID] = containerState(a)
	}
	p.dirtyAll = true
	p.publishUsage()
}

// publishUsage hands the pools' usage to the metrics, which read it
// without the lock.
func (p *Plugin) publishUsage() {
	p.usage.publish(p.alloc.Usage(), p.alloc.MemoryReport())
	if p.topo.Offline.IsEmpty() {
		p.metrics.offlineHeld.Set(0) // no walk while every CPU is online
		return
	}
	p.metrics.offlineHeld.Set(float64(offlineHeldCount(p.alloc)))
}

func containerState(a allocator.Assignment) state.ContainerState {
	return state.ContainerState{PodUID: a.Pod.UID, PodNamespace: a.Pod.Namespace, PodName: a.Pod.Name, Container: a.Container,
		Pool: a.Pool, MilliCPU: a.MilliCPU, CPUs: cpulist.Format(a.CPUs), Reserved: cpulist.Format(a.Reserved), Mems: cpulist.Format(a.Mems),
		Added: formatOrdered(a.Added), NoCPUQuota: a.NoCPUQuota, IsolateIRQs: a.IsolateIRQs,
		IsolatedPartition: a.IsolatedPartition, PowerClass: a.PowerClass, WithShared: a.WithShared, SharedCPUs: sharedPart(a),
		Memory: formatMemory(a.Memory), Rule: a.Rule.Kind, RuleDetail: a.Rule.Detail, DeviceNUMA: a.Rule.DeviceNUMA, FromHold: a.Rule.FromHold,
		OtherContainerKeys: a.Rule.OtherContainerKeys, HideHyperthreads: a.HideHyperthreads}
}

// stateChanged tells the writer that memory moved on (it persists the
// change in the background) and the device plugin that the devices may
// have. Called under the lock, after the record operations.
func (p *Plugin) stateChanged() {
	p.gen++
	p.writer.changed(p.gen)
	p.isolationChanged()
	p.notify()
}

// collectState brings the writer's copy of the state up to date, under the
// lock: only the containers changed since the last call are copied, so the
// lock is held for the size of the change, not of the node (plus the
// holds, the pools' usage and the NUMA nodes' memory, which it publishes
// for the metrics too), and
// the grants when they changed. It returns the generation the copy now
// holds.
func (p *Plugin) collectState(st *state.State, grants *grantsSnapshot) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if grants.gen != p.grants.gen {
		*grants = p.grants.snapshot()
	}
	if p.dirtyAll {
		st.ReplaceContainers(maps.Clone(p.memory.Containers))
		p.dirtyAll = false
	} else {
		// Through the State's setters, so that its store encodes these
		// alone (State.TrackContainerChanges).
		for id := range p.dirty {
			if c, ok := p.memory.Containers[id]; ok {
				st.SetContainer(id, c)
			} else {
				st.DeleteContainer(id)
			}
		}
	}
	clear(p.dirty)
	if p.refusalsDirty {
		st.Refusals = slices.Clone(p.memory.Refusals)
		p.refusalsDirty = false
	}
	clear(st.Previous) // read from older files only
	clear(st.Held)
	for _, h := range p.alloc.Holds() {
		st.Held[h.Pod.UID+"/"+h.Container] = heldState(h)
	}
	usage, mem := p.alloc.Usage(), p.alloc.MemoryReport()
	p.usage.publish(usage, mem)
	for _, u := range usage {
		st.Pools[u.Pool] = p.alloc.PoolCPUs(u.Pool).String()
	}
	st.PowerClasses = p.powerState()
	st.NUMAMemory = numamem.NUMAMemoryStatus(mem)
	return p.gen
}

// rememberHolds copies the allocator's holds into memory, for a
// Synchronize after a runtime restart.
func (p *Plugin) rememberHolds() {
	p.memory.Previous = map[string]string{}
	p.memory.Held = map[string]state.HeldState{}
	for _, h := range p.alloc.Holds() {
		p.memory.Held[h.Pod.UID+"/"+h.Container] = heldState(h)
	}
}

func heldState(h allocator.Hold) state.HeldState {
	return state.HeldState{ContainerID: h.ID, ContainerState: containerState(h.Assignment), ExitCode: h.ExitCode}
}
