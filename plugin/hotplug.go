package plugin

// CPU hotplug: the kernel takes CPUs offline and brings them back
// (echo 0 > /sys/devices/system/cpu/cpuN/online, a fault, a hypervisor
// unplugging a vCPU). The plugin follows:
//
//   - A free CPU that goes offline leaves its pool: it is no longer handed
//     out, counted, advertised to the kubelet or in the DRA slices.
//   - A held CPU that goes offline is what the kernel already did to its
//     container: the container's effective cpuset shrank. It is reported
//     (log, cpupool_offline_held_cpus, status, audit) and stays the
//     container's in its record and in the allocator: it is handed to no
//     one else while the container, or the hold of its stopped container,
//     lives, and the container gets it back when it comes online (cgroup
//     v2 by itself, v1 through an update: giveBack).
//   - A CPU that comes online joins the pool the config gives it
//     (allocator.HotplugLayout), or infra; one still held stays its
//     holder's.
//   - A CPU hot-removed (gone from the present mask too) leaves its pool
//     as an offline one does; if the config in force no longer fits the
//     node without it, that is said at once (hotplug_removed.go).
//
// The watcher reads <sysfsRoot>/sys/devices/system/cpu/online, a few
// bytes, every HotplugInterval, and reads the topology again only when it
// changed, outside the lock. It also hears the kernel's CPU uevents
// (uevents.go), for a CPU that goes offline and comes back between two
// reads.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/power"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// HotplugInterval is how often the hotplug watcher reads the online mask
// (one read of a few bytes): a CPU going offline is seen within it, and
// the pools follow well within a second.
const HotplugInterval = 250 * time.Millisecond

// hotplugWatch paces the watcher; interval 0 is HotplugInterval (tests
// shorten it). uevents, when set, stands for the kernel's CPU uevents
// (tests, whose sysfs trees are fakes); else the watcher listens to the
// kernel's (uevents.go): sysfsRoot is the host's, as the DaemonSet's
// /host is.
type hotplugWatch struct {
	interval time.Duration
	uevents  <-chan cpuUevent
}

// watchHotplug follows the online CPUs until ctx ends, and returns once
// its uevent listener has closed its socket (within ueventPoll).
func (p *Plugin) watchHotplug(ctx context.Context) {
	p.mu.Lock()
	// The present mask as the kernel has it: without the hot-removed
	// CPUs put back (remembered.go).
	root, every, online, present, events := p.cfg.SysfsRoot, p.hotplug.interval, p.topo.Online, p.topo.Present.Difference(p.topo.Absent), p.hotplug.uevents
	p.mu.Unlock()
	if every <= 0 {
		every = HotplugInterval
	}
	if events == nil {
		ch := make(chan cpuUevent, 16)
		events = ch
		// Waited for, so that its socket is closed when Run returns: a
		// read ends within ueventPoll of ctx's end.
		listened := make(chan struct{})
		defer func() { <-listened }()
		proflabel.Go(proflabel.Hotplug, func() {
			defer close(listened)
			if err := cpuUevents(ctx, ch); err != nil {
				p.log.Warnf("hotplug: %v; CPUs are followed by reading the online mask every %s alone, which misses a CPU that goes offline and comes back between two reads (on cgroup v1 its containers then lose it until the next change of the mask)", err, every)
			}
		})
	}
	path := filepath.Join(root, "sys/devices/system/cpu/online")
	presentPath := filepath.Join(root, "sys/devices/system/cpu/present")
	// The online mask, and the present one: a vCPU the hypervisor
	// unplugs may be seen offline first and leave the present mask at a
	// later read, which changes the online mask no more (warnRemoved).
	masks := func() ([]byte, error) {
		now, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		present, _ := os.ReadFile(presentPath) // a node without it: the online mask alone
		return append(append(now, '|'), present...), nil
	}
	// The masks as the topology was read: no second discovery at start
	// (a node of a thousand CPUs reads thousands of files for it).
	var last []byte
	if now, err := os.ReadFile(path); err == nil {
		if set, err := cpulist.Parse(string(now)); err == nil && set.Equals(online) {
			pr, err := os.ReadFile(presentPath)
			if set, perr := cpulist.Parse(string(pr)); os.IsNotExist(err) || err == nil && perr == nil && set.Equals(present) {
				last = append(append(now, '|'), pr...)
			}
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			// Only a CPU that came online matters here, and only once
			// the pools have it (a change of the mask is followed at
			// the next read, which gives it back): reading the mask,
			// or the topology, at every event of a storm (SMT turned
			// off takes half the CPUs offline one by one) is left to
			// the ticker.
			if ev.online {
				p.giveBackFlipped(ev.cpu)
			}
			continue
		case <-t.C:
		}
		now, err := masks()
		if err != nil || bytes.Equal(now, last) {
			continue // a node without the file has no hotplug
		}
		if err := p.checkHotplug(root); err != nil {
			p.log.Warnf("hotplug: %v; trying again", err)
			continue
		}
		last = now
	}
}

// giveBackFlipped gives CPU cpu (every online CPU for -1) back to its
// containers after the kernel said it came online, also when the online
// mask never showed it offline (it went and came back between two reads):
// cgroup v1 dropped it from their cpusets all the same. A CPU the pools do
// not have yet is given back when the next read of the mask brings it in
// (applyHotplug); one they have already been given back may be sent again,
// which changes nothing.
func (p *Plugin) giveBackFlipped(cpu int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	back := p.topo.Online
	if cpu >= 0 {
		if !back.Contains(cpu) {
			return
		}
		back = cpuset.New(cpu)
	}
	p.giveBack(p.alloc, back)
}

// checkHotplug reads the topology again and follows it if its online
// CPUs changed.
func (p *Plugin) checkHotplug(root string) error {
	found, err := sysfs.Discover(root)
	if err != nil {
		return fmt.Errorf("reading the topology again: %w", err)
	}
	// The power classes' files of the CPUs online now are read before
	// the lock, for the config in force then; a reload meanwhile reads
	// them again under it.
	p.mu.Lock()
	cfg, gen := p.cfg, p.rememberedGen
	// A CPU hot-removed stays in its pool as an offline CPU, at the
	// place remembered while it was present, as at a restart.
	topo := found.WithRemembered(p.seenCPUs)
	p.mu.Unlock()
	refusals := power.NewNode(root, topo).Refusals(cfg)
	p.mu.Lock()
	if p.rememberedGen != gen {
		// Configure read the record of the configured state file
		// meanwhile: its CPUs are the ones put back.
		topo = found.WithRemembered(p.seenCPUs)
	}
	// A CPU hot-removed while offline changes the present mask alone:
	// followed all the same, so that it is said (warnRemoved) and the
	// topology in force is the node's.
	changed := !topo.Online.Equals(p.topo.Online) || !topo.Present.Equals(p.topo.Present) || !topo.Absent.Equals(p.topo.Absent)
	if changed {
		if p.cfg != cfg {
			refusals = power.NewNode(root, topo).Refusals(p.cfg)
		}
		p.applyHotplug(topo, refusals)
		p.discovered = found
	}
	p.mu.Unlock()
	// A CPU hot-added is remembered, for when it is removed again.
	p.rememberCPUs(topo)
	if changed {
		// The IRQ source knows the online CPUs it was made with. Made
		// again in the background: closing the reconciler waits for its
		// pass, and the next CPU going offline must not wait for it.
		proflabel.Go(proflabel.IsolationRestart, p.restartIsolation)
	}
	return nil
}

// applyHotplug makes topo the node's topology: the pools lose the CPUs
// that went offline and gain those that came online, and every container
// and hold keeps its CPUs (allocator.Rebase). Called under the lock.
func (p *Plugin) applyHotplug(topo *sysfs.Topology, powerRefusals map[string]string) {
	old := p.alloc
	wentOff, cameOn := p.topo.Online.Difference(topo.Online), topo.Online.Difference(p.topo.Online)
	layout, problems := allocator.HotplugLayout(old.Layout(), topo, p.cfg)
	if problems.HasErrors() {
		// Its warnings were said at start and at each reload.
		p.log.Warnf("hotplug: CPUs %s that came online join infra: the config cannot be laid out on the node as it is now: %v", cameOn, problems.Errors())
	}
	next, _ := old.Rebase(topo, layout)
	owners := ownersOf(next)
	for _, cpu := range wentOff.List() {
		p.metrics.hotplug.WithLabelValues("offline").Inc()
		if who, ok := owners[cpu]; ok {
			p.log.Warnf("hotplug: CPU %d went offline under %s: the kernel took it from its cpuset; it stays its own, and is given to no one else while it lives", cpu, who)
			continue
		}
		p.log.Warnf("hotplug: CPU %d went offline: it leaves pool %s", cpu, layoutPoolOf(old.Layout(), cpu))
	}
	for _, cpu := range cameOn.List() {
		p.metrics.hotplug.WithLabelValues("online").Inc()
		if who, ok := owners[cpu]; ok {
			p.log.Infof("hotplug: CPU %d came online: still held by %s", cpu, who)
			continue
		}
		p.log.Infof("hotplug: CPU %d came online: it joins pool %s", cpu, layoutPoolOf(layout, cpu))
	}
	p.noteEmptyPools(old, next)
	p.warnRemoved(p.topo, topo, old.Layout())
	infraBefore := old.PoolCPUs(pools.Infra)
	p.topo = topo
	p.policy = allocator.NewPolicy(p.cfg, topo)
	p.policy.SetPowerRefusals(powerRefusals)
	p.swapAllocator(next)
	if !infraBefore.Equals(p.alloc.PoolCPUs(pools.Infra)) {
		p.pinSandboxesLater()
	}
	p.giveBack(old, cameOn)
	p.log.Infof("hotplug: online CPUs %s; pools: %s", topo.Online, layout.Describe())
}

// noteEmptyPools says, once as it happens, that every CPU of the shared or
// the infra pool went offline and where its members run meanwhile
// (allocator.MembersCPUs), and that they move back when the pool has CPUs
// again.
func (p *Plugin) noteEmptyPools(old, next *allocator.Allocator) {
	members := func(pool string) int {
		n := 0
		for _, a := range next.Assignments() {
			if a.Pool == pool || pool == pools.Shared && a.WithShared && pools.IsExclusive(a.Pool) {
				n++
			}
		}
		return n
	}
	wasNone := old.MembersCPUs(pools.Shared).IsEmpty()
	if !wasNone && next.MembersCPUs(pools.Shared).IsEmpty() {
		n := members(pools.Shared) + members(pools.Infra)
		p.log.Errorf("hotplug: every CPU of pools shared and infra is offline: their %s %s its offline CPUs, and the kernel runs them on their parent cgroup's CPUs until one comes back online",
			plural.Count(n, "container"), plural.Verb(n, "keeps", "keep"))
		return
	}
	for _, pool := range []string{pools.Shared, pools.Infra} {
		was, now := old.PoolCPUs(pool), next.PoolCPUs(pool)
		switch {
		case !was.IsEmpty() && now.IsEmpty():
			n := members(pool)
			p.log.Warnf("hotplug: every CPU of pool %s is offline: its %s %s on CPUs %s (pool %s) until one comes back online; new containers of pool %s are refused meanwhile",
				pool, plural.Count(n, "container"), plural.Verb(n, "runs", "run"), next.MembersCPUs(pool), otherMembersPool(pool), pool)
		case was.IsEmpty() && !now.IsEmpty():
			p.log.Infof("hotplug: pool %s has CPUs %s again: its containers move back to it", pool, now)
		}
	}
}

// otherMembersPool is the pool whose CPUs the members of pool run on while
// it has none (allocator.MembersCPUs).
func otherMembersPool(pool string) string {
	if pool == pools.Infra {
		return pools.Shared
	}
	return pools.Infra
}

// giveBack sends the running containers that hold CPUs that came online,
// or whose pool gained them, their cpusets again: cgroup v1 dropped the
// CPU from their cpuset.cpus when it went offline, and empties a cpuset
// all of whose CPUs went offline, and puts nothing back (v2 does, and the
// update changes nothing there). An exclusive container's record kept the
// CPU; a shared or infra member whose record did not change (its pool
// came back as it was, while nothing was left to run it on meanwhile:
// allocator.MembersCPUs) would otherwise never be sent it. Those whose
// record changed from old's are already on their way (swapAllocator).
// Called under the lock.
func (p *Plugin) giveBack(old *allocator.Allocator, cameOn cpuset.CPUSet) {
	if cameOn.IsEmpty() || !p.synced {
		return
	}
	var back []string
	for _, a := range p.alloc.Assignments() {
		cpus := a.Cpuset()
		if pools.IsExclusive(a.Pool) {
			cpus = a.Held()
			if a.WithShared {
				cpus = cpus.Union(a.Shared)
			}
		} else if was, ok := old.Get(a.ID); ok && !cpulist.Equal(was.CPUs, a.CPUs) {
			continue // moved: swapAllocator sends it
		}
		if !cpus.Intersection(cameOn).IsEmpty() {
			back = append(back, a.ID)
			p.pending[a.ID] = true
		}
	}
	if len(back) > 0 {
		p.log.Infof("hotplug: %d containers get their CPUs that came back online again", len(back))
		p.pushLater(back)
	}
}

// offlineHeldCount is how many CPUs containers and holds keep while
// offline, for cpupool_offline_held_cpus.
func offlineHeldCount(a *allocator.Allocator) int {
	n := 0
	for _, cpus := range a.OfflineHeld() {
		n += cpus.Size()
	}
	return n
}

// reportOfflineHeld logs, once Synchronize has taken the containers and
// holds back, the CPUs they keep that are offline (the kernel took them
// while the plugin was away, or before): they stay their owners', as they
// would have had the plugin seen them go (applyHotplug). Called under the
// lock.
func (p *Plugin) reportOfflineHeld() {
	off := p.alloc.OfflineHeld()
	if len(off) == 0 {
		return
	}
	who := map[string]string{}
	for _, c := range p.alloc.Assignments() {
		who[c.ID] = "container " + c.Pod.ContainerName(c.Container)
	}
	for _, h := range p.alloc.Holds() {
		who[h.ID] = "stopped container " + h.Pod.ContainerName(h.Container) + " (held for its pod)"
	}
	for _, id := range slices.Sorted(maps.Keys(off)) {
		n := off[id].Size()
		p.log.Warnf("synchronize: %s of %s %s offline: the kernel took %s from its cpuset; %s its own, and %s given to no one else while it lives",
			plural.CPUs(off[id]), who[id], plural.Verb(n, "is", "are"), plural.Verb(n, "it", "them"), plural.Verb(n, "it stays", "they stay"), plural.Verb(n, "is", "are"))
	}
}

// ownersOf names, by CPU, the container or stopped container that holds
// each exclusive CPU.
func ownersOf(a *allocator.Allocator) map[int]string {
	out := map[int]string{}
	for _, c := range a.Assignments() {
		if pools.IsExclusive(c.Pool) {
			for _, cpu := range c.Held().List() {
				out[cpu] = "container " + c.Pod.ContainerName(c.Container)
			}
		}
	}
	for _, h := range a.Holds() {
		for _, cpu := range h.Held().List() {
			out[cpu] = "stopped container " + h.Pod.ContainerName(h.Container) + " (held for its pod)"
		}
	}
	return out
}

// layoutPoolOf names the pool a layout gives a CPU.
func layoutPoolOf(l *allocator.Layout, cpu int) string {
	var names []string
	for _, name := range pools.Names() {
		if l.Pool(name).Contains(cpu) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, " and ")
}
