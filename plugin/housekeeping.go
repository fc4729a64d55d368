package plugin

// Housekeeping confinement: the plugin's side of package housekeeping. A
// decision only changes the allocator and kicks the host files'
// reconciler; its background pass asks which CPUs to keep host processes
// off (housekeepingKept) and narrows the workqueue mask, the top-level
// cgroups or systemd's slices, and threads' affinities to the rest.

import (
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/pools"
)

// housekeepingSource is the Source of housekeeping confinement for the
// reconciler: when a pool asks for it, when isolcpus= CPUs of the pools
// are kept free of host processes (keepHostOffIsolcpus, the default), or
// when the journal holds files an earlier run changed (restored once
// nothing wants them: a restart with the feature off). Nil otherwise.
func (p *Plugin) housekeepingSource(j *hostfiles.Journal) *housekeeping.Source {
	if !p.housekeepingWanted() && !hasOwner(j, housekeeping.Owner) {
		return nil
	}
	cfg := housekeeping.Config{SysfsRoot: p.cfg.SysfsRoot, CgroupRoot: p.cfg.CgroupRoot, ProcRoot: p.cfg.ProcRoot,
		Online: p.topo.Online, DomainIsolated: p.topo.DomainIsolated, Floor: p.cfg.Pools.ExclusiveNonIsolcpus.MinInfraCPUs, Kept: p.housekeepingKept, PodCgroups: p.podCgroups,
		Recorded: j.Records(),
		// The global workqueue mask is kernelWork's when no pool has
		// housekeeping (kernelWorkSources).
		LeaveWorkqueueMask: !p.cfg.HousekeepingEnabled() && p.cfg.WorkqueuesHeld(),
		// Otherwise it leaves kernelWork.workqueues' held CPUs out too,
		// those of pools without housekeeping included.
		WorkqueueAlsoOff: p.kernelWorkHeld((*config.Config).WorkqueuesHeld)}
	// Kernel threads, and on cgroup v1 the host's processes, by affinity
	// through the reconciler's FS.
	cfg.ThreadAffinity = housekeeping.ServesAffinity(p.isolationFS)
	if sfs, ok := p.isolationFS.(*housekeeping.SystemdFS); ok {
		// Under systemd the host's slices get AllowedCPUs= through the
		// reconciler's FS, which serves their properties.
		cfg.Systemd = sfs
	}
	return housekeeping.NewSource(cfg, p.log)
}

// housekeepingWanted tells whether anything keeps host processes off
// CPUs: a pool's housekeeping, or isolcpus= CPUs of the pools.
func (p *Plugin) housekeepingWanted() bool {
	return p.cfg.HousekeepingEnabled() || !p.isolcpusKept().IsEmpty()
}

// isolcpusKept are the CPUs isolcpus= took out of the scheduler's domains
// that the exclusive and shared pools have (keepHostOffIsolcpus): kept
// free of host processes whether or not a container holds them. At boot
// PID 1's affinity leaves them out and every host process inherits it;
// on cgroup v2 the runtime enables the cpuset controller at the root for
// the pods' cgroups, and the kernel resets the affinity of every task of
// a cgroup whose cpuset changes to that cgroup's CPUs, every CPU. An
// isolated CPU has no scheduling domain, so nothing balances a task that
// lands there away again: without this the pools' isolated CPUs run the
// host's processes (issue 42). An isolated CPU the pools leave to infra
// is lent to host work, and left alone.
//
// Only where the plugin sees the host's threads (seesHostThreads): a
// confinement resets the host processes' affinities, which it must record
// first to give back exactly. Without the host's PID namespace (a
// DaemonSet pod without hostPID) the default does nothing, with a warning
// at start (warnIsolcpusUnkept); a pool's housekeeping is asked for, and
// is not held back.
func (p *Plugin) isolcpusKept() cpuset.CPUSet {
	if !p.cfg.KeepHostOffIsolcpus || p.alloc == nil || !p.seesHostThreads {
		return cpuset.New()
	}
	l := p.alloc.Layout()
	return p.topo.DomainIsolated.Intersection(l.Exclusive.Union(l.Shared)).Intersection(p.topo.Online)
}

// warnIsolcpusUnkept says, at a start or reload, that keepHostOffIsolcpus
// is on but cannot act here (isolcpusKept), and what to do.
func (p *Plugin) warnIsolcpusUnkept() {
	if !p.cfg.KeepHostOffIsolcpus || p.seesHostThreads || p.alloc == nil {
		return
	}
	l := p.alloc.Layout()
	if cpus := p.topo.DomainIsolated.Intersection(l.Exclusive.Union(l.Shared)); !cpus.IsEmpty() {
		p.log.Warnf("keepHostOffIsolcpus: host processes are not kept off the pools' isolcpus= CPUs %s: %s/2 is not kthreadd, "+
			"so this process does not see the host's PID namespace and could not give the host processes' affinities back exactly; "+
			"run the plugin in the host's PID namespace (the systemd unit, or hostPID: true) to have them kept free, "+
			"or set keepHostOffIsolcpus: false to silence this", cpus, p.cfg.ProcRoot)
	}
}

// housekeepingKept is what the pools keep host processes off, for the
// reconciler's pass: the CPUs the containers and holds of pools with
// housekeeping hold (their hidden siblings too), the whole of the pools
// kept always, and the pools' isolcpus= CPUs (isolcpusKept).
func (p *Plugin) housekeepingKept() housekeeping.Kept {
	p.mu.Lock()
	defer p.mu.Unlock()
	var kept housekeeping.Kept
	isolcpus := p.isolcpusKept()
	if !p.cfg.HousekeepingEnabled() {
		// Nothing kept (every file restored), or the isolated CPUs only.
		kept.Held, kept.Idle = cpuset.New(), isolcpus
		return kept
	}
	kept.Held = p.alloc.HeldCPUs(func(pool string) bool { return p.cfg.Housekeeping(pool) != config.HousekeepingOff })
	kept.Idle = cpuset.New()
	for _, pool := range []string{pools.Exclusive, pools.Shared} {
		if p.cfg.Housekeeping(pool) == config.HousekeepingAlways {
			kept.Idle = kept.Idle.Union(p.alloc.PoolCPUs(pool))
		}
	}
	kept.Idle = kept.Idle.Union(isolcpus).Difference(kept.Held)
	return kept
}

// podCgroups are the top-level cgroups the pods' sandboxes are in, for the
// reconciler's pass: housekeeping leaves them alone, whatever the
// kubelet's cgroup root is called.
func (p *Plugin) podCgroups() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for id, sb := range p.sandbox {
		if !sb.topKnown {
			// Once per sandbox, not at every pass: naming every pod's
			// cgroup made a pass's allocations grow with the pods
			// (issue 45).
			sb.top, sb.topKnown = podCgroupTop(sb.cgroupParent), true
			p.sandbox[id] = sb
		}
		top := sb.top
		if top != "" && !seen[top] {
			seen[top] = true
			out = append(out, top)
		}
	}
	return out
}

// podCgroupTop is the top-level cgroup of a pod's cgroup parent, "" when
// it has none.
func podCgroupTop(parent string) string {
	dir, err := podCgroupDir(parent)
	if err != nil {
		return ""
	}
	top, _, _ := strings.Cut(strings.TrimPrefix(dir, "/"), "/")
	return top
}
