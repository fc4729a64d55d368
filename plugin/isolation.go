package plugin

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/irq"
	"github.com/cpupool/nri-cpupool/kernelwork"
	"github.com/cpupool/nri-cpupool/partition"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/power"
)

// isolation is the plugin's side of the host files it changes to isolate
// exclusive CPUs (package hostfiles): the journal of original values next
// to the state file, one background reconciler, the IRQ source and the
// isolated partitions' source. A handler only kicks the reconciler (no
// I/O, no computing); the pass asks the plugin, under its lock, which CPUs
// to keep IRQs off (irqBanned) and which containers to partition
// (partitionWants), and writes in the background.
type isolation struct {
	journal *hostfiles.Journal
	recon   *hostfiles.Reconciler
	// fs is the reconciler's: the plugin's isolationFS, which also
	// serves irqbalance's banned CPUs when there is an IRQ Source.
	fs hostfiles.FS
	// irq is nil when no pool keeps IRQs off its CPUs and the journal
	// holds no IRQ record of this boot (nothing to move, nothing to put
	// back); partition likewise for isolated partitions.
	irq       *irq.Source
	partition *partition.Source
	// power is nil when no pool has a power class and the journal holds
	// no power record of this boot (power.go).
	power *power.Source
	// housekeeping is nil when no pool keeps host processes off its CPUs
	// and the journal holds no housekeeping record of this boot
	// (housekeeping.go).
	housekeeping *housekeeping.Source
	// rps and workqueues are nil when their kernelWork knob is off and
	// the journal holds no record of theirs of this boot (kernelwork.go).
	rps        *kernelwork.RPSSource
	workqueues *kernelwork.WorkqueueSource
	// before are the counters of the reconcilers closed before this one
	// (isolationtotals.go); raised, never lowered, when one closes after
	// this one opened.
	before atomic.Pointer[hostFileTotals]
}

// openIsolation reads the journal for this boot and starts the
// reconciler; its first pass waits for the first Synchronize's kick.
func (p *Plugin) openIsolation() error {
	iso, err := p.buildIsolation()
	if err != nil {
		return err
	}
	// The IRQ Source of the reconciler a reload or hotplug closed: the
	// IRQs it narrowed for CPUs released since still hold its values,
	// which the new Source must know as the plugin's own (irq.TakeOwnWrites),
	// or they keep those CPUs off for as long as any other stays banned.
	if prev := p.irqOwnWritesFrom; prev != nil {
		p.irqOwnWritesFrom = nil
		if iso.irq != nil {
			iso.irq.TakeOwnWrites(prev)
		}
	}
	n := iso.journal.Len() // before any pass may run
	iso.recon.Start()
	p.isolation.Store(iso)
	if n > 0 {
		p.log.Infof("isolation: %d host files changed by an earlier run; restored once the runtime says which containers still run", n)
	}
	return nil
}

// buildIsolation reads the journal for this boot and makes the reconciler
// of the Sources the config and the journal call for, not started: it
// makes no pass but those its caller asks for (Flush), so that the caller
// may read the journal between them (RestoreHost), which only a pass may
// touch; a started one passes on its own (its rescan) once the first
// Flush or Kick makes it ready.
func (p *Plugin) buildIsolation() (*isolation, error) {
	bootID, bootErr := os.ReadFile(filepath.Join(p.cfg.ProcRoot, "sys/kernel/random/boot_id"))
	if bootErr != nil {
		// Unknown is not another boot: the journal keeps its records and
		// the boot id it names (hostfiles.OpenJournal).
		bootID = nil
		p.log.Warnf("isolation: reading the boot id: %v; original values of host files recorded earlier are taken as this boot's", bootErr)
	}
	j, note, err := hostfiles.OpenJournal(p.isolationFS, hostfiles.JournalPath(p.cfg.StateFile), string(bootID))
	switch {
	case errors.Is(err, hostfiles.ErrJournalDiscarded):
		p.log.Errorf("isolation: %v", err)
	case err != nil:
		return nil, err
	}
	switch {
	case note != "" && bootErr != nil:
		p.log.Warnf("isolation: %s", note)
	case note != "":
		p.log.Infof("isolation: %s", note)
	}
	// The journal's records name the root each file lay under: a node
	// moved between the chart (sysfsRoot /host) and the package (/) keeps
	// its state directory, and its records are found under this
	// process's roots.
	if n := j.Rebase(map[string]string{hostfiles.RootSys: filepath.Join(p.cfg.SysfsRoot, "sys"), hostfiles.RootProc: p.cfg.ProcRoot, hostfiles.RootCgroup: p.cfg.CgroupRoot}); n > 0 {
		p.log.Infof("isolation: %d original values of host files were recorded under other roots (sysfsRoot, procRoot or cgroupRoot); taken as the same files under this process's", n)
	}
	iso := &isolation{journal: j}
	before := p.hostFilesBefore
	iso.before.Store(&before)
	var sources []hostfiles.Source
	if p.cfg.IRQIsolationEnabled() || hasOwner(j, irq.Owner) {
		// irq.irqbalance: off tells irqbalance nothing new, but a ban an
		// earlier process told it (journaled) is still undone.
		cfg := irq.Config{ProcRoot: p.cfg.ProcRoot, SysfsRoot: p.cfg.SysfsRoot, Online: p.topo.Online,
			NodeCPUs: map[int]cpuset.CPUSet{}, Banned: p.irqBanned,
			IrqbalanceDir: p.cfg.IRQ.IrqbalanceDir, LeaveIrqbalance: p.cfg.IRQ.Irqbalance != "socket"}
		for _, n := range p.topo.NUMANodes {
			cfg.NodeCPUs[n.ID] = n.CPUs
		}
		iso.irq = irq.NewSource(cfg, p.log)
		sources = append(sources, iso.irq)
	}
	if p.partitionsEnabled() || hasOwner(j, partition.Owner) {
		if ok, why := partition.Supported(p.cfg.CgroupRoot); !ok && p.partitionsEnabled() {
			p.log.Warnf("isolation: isolated partitions are configured, but %s; containers that ask for them run without", why)
		}
		iso.partition = partition.NewSource(p.cfg.CgroupRoot, p.partitionWants, p.log)
		sources = append(sources, iso.partition)
	}
	if iso.power = p.powerSource(j); iso.power != nil {
		sources = append(sources, iso.power)
	}
	if iso.housekeeping = p.housekeepingSource(j); iso.housekeeping != nil {
		sources = append(sources, iso.housekeeping)
	}
	iso.rps, iso.workqueues = p.kernelWorkSources(j)
	if iso.rps != nil {
		sources = append(sources, iso.rps)
	}
	if iso.workqueues != nil {
		sources = append(sources, iso.workqueues)
	}
	timing := p.isolationTiming
	timing.Rescan = p.cfg.IRQ.RescanInterval.Duration
	// irqbalance's banned CPUs are a journaled file of the IRQ Source's
	// own (irq.IrqbalancePath), served through its socket; no other path
	// below irq.IrqbalanceRoot reaches the host, also without an IRQ
	// Source (iso.irq nil).
	iso.fs = iso.irq.FS(p.isolationFS)
	iso.recon = hostfiles.NewReconciler(iso.fs, j, p.log, timing, sources...)
	// Every file a Source changes lies under these: a journal record of
	// any other file (a damaged or forged journal) is never written.
	iso.recon.RestoreOnlyUnder(filepath.Join(p.cfg.ProcRoot, "irq"), filepath.Join(p.cfg.SysfsRoot, "sys/devices/system/cpu"), p.cfg.CgroupRoot,
		filepath.Join(p.cfg.SysfsRoot, filepath.Dir(housekeeping.WorkqueueMask)), housekeeping.SystemdRoot, housekeeping.AffinityRoot, irq.IrqbalanceRoot,
		filepath.Join(p.cfg.ProcRoot, kernelwork.RPSDefaultMask))
	// rps_cpus files lie under their device's directory, anywhere below
	// /sys/devices: admitted one by one.
	iso.recon.RestoreAlsoWhere(kernelwork.RPSFileRule(p.cfg.SysfsRoot))
	return iso, nil
}

func hasOwner(j *hostfiles.Journal, owner string) bool {
	for _, r := range j.Records() {
		if r.Owner == owner {
			return true
		}
	}
	return false
}

// isolationChanged tells the reconciler that what the plugin holds moved
// on. Called under the lock; it never blocks.
func (p *Plugin) isolationChanged() {
	if iso := p.isolation.Load(); iso != nil && (iso.irq != nil || iso.partition != nil || iso.power != nil || iso.housekeeping != nil || iso.rps != nil || iso.workqueues != nil) && p.synced {
		iso.recon.Kick()
	}
}

func (p *Plugin) partitionsEnabled() bool {
	return p.cfg.IsolatedPartition(pools.Exclusive) != config.IRQIsolationOff ||
		p.cfg.IsolatedPartition(pools.ExclusiveNonIsolcpus) != config.IRQIsolationOff
}

// partitionSkippedForShared is the label of cpupool_isolated_partitions_skipped_total
// for a container that runs on the shared pool too.
const partitionSkippedForShared = "shared-cpus"

// notePartitionSkipped warns, and counts, that a container placed by req
// runs without the isolated partition its pool gives by default
// (isolatedPartition: optOut): it asked for the shared pool too, which a
// partition would take from it (allocator.Request.PartitionSkipped).
// Called under the lock.
func (p *Plugin) notePartitionSkipped(who string, req allocator.Request) {
	if !req.PartitionSkipped {
		return
	}
	p.metrics.partitionsSkipped.WithLabelValues(partitionSkippedForShared).Inc()
	msg := fmt.Sprintf("container %s: not in an isolated partition, which pools.%s.isolatedPartition: optOut gives, because it also runs on the shared pool (%s): the kernel runs a partition's threads only on its exclusive CPUs; its exclusive CPUs stay in the scheduler's load balancing unless isolcpus covers them",
		who, req.Pool, allocator.AnnotationSharedCPUs)
	p.log.Warnf("%s", msg)
	p.postEvent(req.Pod, true, EventPartitionSkipped, msg)
}

// rememberCgroup notes the cgroup of a container placed in an isolated
// partition. Called under the lock.
func (p *Plugin) rememberCgroup(a allocator.Assignment, ctr *api.Container) {
	if a.IsolatedPartition {
		p.cgroups[a.ID] = partitionCgroup{path: ctr.GetLinux().GetCgroupsPath()}
	}
}

// partitionCgroup is a partitioned container's cgroups path, as the
// runtime gave it, and what partitionWants made of it at its first pass:
// the cgroup's directory and the container's name, worked out once, not at
// every pass (issue 45: a pass's allocations grew with the exclusive
// containers). Both are fixed for a container id: its pod and name never
// change, and Synchronize, which rebuilds the allocator, forgets them.
type partitionCgroup struct {
	path string
	// dirDone: dir (or dirErr) is what cgroupDir made of path.
	dirDone bool
	dir     string
	dirErr  error
	// who names the container ("" until made).
	who string
}

// rememberCgroups notes the cgroups of the running containers in isolated
// partitions, after Synchronize rebuilt the allocator.
func (p *Plugin) rememberCgroups(running []*api.Container) {
	clear(p.cgroups)
	for _, c := range running {
		if a, ok := p.alloc.Get(c.GetId()); ok {
			p.rememberCgroup(a, c)
		}
	}
}

// partitionWants are the containers whose cgroups are isolated
// partitions, for the reconciler's pass.
func (p *Plugin) partitionWants() []partition.Want {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]partition.Want, 0, len(p.cgroups))
	for id, c := range p.cgroups {
		a, ok := p.alloc.Get(id)
		if !ok || !a.IsolatedPartition {
			continue
		}
		if !c.dirDone {
			c.dir, c.dirErr = cgroupDir(c.path)
			c.dirDone = true
			p.cgroups[id] = c
		}
		if c.dirErr != nil {
			continue // a container without a cgroup path has nothing to partition
		}
		if c.who == "" {
			c.who = a.Pod.ContainerName(a.Container)
			p.cgroups[id] = c
		}
		out = append(out, partition.Want{Dir: c.dir, CPUs: a.CPUs, Who: c.who})
	}
	return out
}

// irqBanned is the CPUs to keep IRQs off, for the reconciler's pass: the
// CPUs of exclusive containers and holds that asked for it, and the pools
// that keep their CPUs free of IRQs always.
func (p *Plugin) irqBanned() cpuset.CPUSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	banned := p.alloc.IRQIsolated()
	for _, pool := range []string{pools.Exclusive, pools.Shared} {
		if p.cfg.IRQIsolation(pool) == config.IRQIsolationAlways {
			banned = banned.Union(p.alloc.PoolCPUs(pool))
		}
	}
	return banned
}

// closeIsolation stops the reconciler; it restores nothing (the containers
// keep running, the next start decides). Not under the lock: a pass takes it.
func (p *Plugin) closeIsolation() {
	// After a restart under way (restartIsolation), and for good: none
	// is made again.
	p.isolationRestart.Lock()
	defer p.isolationRestart.Unlock()
	p.isolationClosed = true
	p.stopJournalRetry()
	if iso := p.isolation.Load(); iso != nil {
		iso.recon.Close()
	}
}

// FlushIsolation makes a pass of the host files now (tests, the audit).
// It must not be called with the lock held.
func (p *Plugin) FlushIsolation() error {
	if iso := p.isolation.Load(); iso != nil {
		return iso.recon.Flush()
	}
	return nil
}

// isolationMetrics exports the reconciler's figures; they are read from
// its status snapshot, never waiting for a pass.
type isolationMetrics struct {
	p                                        *Plugin
	changed, refused, writes, restores, errs *prometheus.Desc
	restoreRefused                           *prometheus.Desc
	banned, movesPending, systemdUnreachable *prometheus.Desc
	passes, settled                          *prometheus.Desc
	widened                                  *prometheus.Desc
}

var _ prometheus.Collector = (*isolationMetrics)(nil)

// hostFileOwners are the owners of the host files the plugin changes, as
// the journal records them and the metrics label them: one per source.
// The metric's help names them from here, so that it lists every one
// (review 58, item 14: it lacked rps and workqueues).
func hostFileOwners() []string {
	return []string{irq.Owner, partition.Owner, power.Owner, housekeeping.Owner, kernelwork.RPSOwner, kernelwork.WorkqueueOwner}
}

func newIsolationMetrics(p *Plugin) *isolationMetrics {
	return &isolationMetrics{p: p,
		changed: prometheus.NewDesc("cpupool_host_files_changed", "Host files the plugin changed and has not restored yet (their originals are in the journal), by owner ("+
			strings.Join(hostFileOwners(), ", ")+").", []string{"owner"}, nil),
		widened:  prometheus.NewDesc("cpupool_host_files_widened", "Host files given back as near their original as the kernel takes for now, by owner: a populated top-level cgroup's empty cpuset.cpus holds its parent's CPUs instead (what the empty list gives it). Their records stay in the journal for the exact original once the cgroup has no tasks; not counted in cpupool_host_files_changed.", []string{"owner"}, nil),
		refused:  prometheus.NewDesc("cpupool_host_files_refused", "Host files the kernel refuses to change (kernel-managed IRQs) or to restore, and journal records outside the roots it may restore; EINVAL is tried again at each rescan, the others not while the value stays the same.", []string{"owner"}, nil),
		writes:   prometheus.NewDesc("cpupool_host_file_writes_total", "Host file writes that set a wanted value.", nil, nil),
		restores: prometheus.NewDesc("cpupool_host_file_restores_total", "Host files given their original value back.", nil, nil),
		errs:     prometheus.NewDesc("cpupool_host_file_errors_total", "Failed host file operations: transient ones are retried with backoff, permanent ones are not.", []string{"kind"}, nil),
		banned:   prometheus.NewDesc("cpupool_irq_banned_cpus", "CPUs the last pass kept device IRQs off.", nil, nil),
		movesPending: prometheus.NewDesc("cpupool_irq_moves_pending",
			"Device IRQs the passes moved off held CPUs whose move the kernel deferred until they next fire: that next interrupt is taken on the held CPU.", nil, nil),
		passes: prometheus.NewDesc("cpupool_host_file_passes_total",
			"Passes over the host files, by kind: full (a rescan or a flush: every wanted file read) or kicked (a change's: files known to meet their want not read again).", []string{"kind"}, nil),
		settled: prometheus.NewDesc("cpupool_host_files_settled_total",
			"Wanted host files that kicked passes took as meeting their want, without reading them.", nil, nil),
		systemdUnreachable: prometheus.NewDesc("cpupool_housekeeping_systemd_unreachable_total",
			"Passes of housekeeping that found systemd's D-Bus API unreachable where systemd manages the cgroups, and left the host's units as they were.", nil, nil),
		// Apart from refused, where an IRQ's restore refusal would hide
		// among the kernel-managed IRQs' refusals at apply, which every
		// node with NVMe has and the alerts leave out (review C-M6: an
		// unprivileged pod's read-only /proc/irq).
		restoreRefused: prometheus.NewDesc("cpupool_host_files_restore_refused",
			"Host files whose recorded original the plugin cannot put back: the kernel refuses it (EROFS: a read-only /proc/irq or /sys, as in an unprivileged pod) or the file is outside the roots it may restore; their originals stay in the journal. Counted in cpupool_host_files_refused too.", []string{"owner"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *isolationMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.changed, m.widened, m.refused, m.restoreRefused, m.writes, m.restores, m.errs, m.banned, m.movesPending, m.systemdUnreachable, m.passes, m.settled} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *isolationMetrics) Collect(ch chan<- prometheus.Metric) {
	iso := m.p.isolation.Load()
	if iso == nil {
		return
	}
	st := iso.recon.Status()
	owners := map[string]bool{irq.Owner: true, partition.Owner: true}
	if iso.power != nil {
		owners[power.Owner] = true
	}
	if iso.housekeeping != nil {
		owners[housekeeping.Owner] = true
	}
	if iso.rps != nil {
		owners[kernelwork.RPSOwner] = true
	}
	if iso.workqueues != nil {
		owners[kernelwork.WorkqueueOwner] = true
	}
	refused, restoreRefused := map[string]int{}, map[string]int{}
	for _, f := range st.Failures {
		refused[f.Owner]++
		if f.Restore {
			restoreRefused[f.Owner]++
		}
		owners[f.Owner] = true
	}
	for o := range st.Records {
		owners[o] = true
	}
	changed, widened := changedAndWidened(st)
	for o := range owners {
		ch <- prometheus.MustNewConstMetric(m.changed, prometheus.GaugeValue, float64(changed[o]), o)
		ch <- prometheus.MustNewConstMetric(m.widened, prometheus.GaugeValue, float64(widened[o]), o)
		ch <- prometheus.MustNewConstMetric(m.refused, prometheus.GaugeValue, float64(refused[o]), o)
		ch <- prometheus.MustNewConstMetric(m.restoreRefused, prometheus.GaugeValue, float64(restoreRefused[o]), o)
	}
	// Counters: the reconcilers' before this one too, so that a reload
	// or a hotplug, which makes a new one, does not reset them.
	total := iso.totalsWith(st)
	ch <- prometheus.MustNewConstMetric(m.writes, prometheus.CounterValue, float64(total.writes))
	ch <- prometheus.MustNewConstMetric(m.restores, prometheus.CounterValue, float64(total.restores))
	ch <- prometheus.MustNewConstMetric(m.errs, prometheus.CounterValue, float64(total.transient), "transient")
	ch <- prometheus.MustNewConstMetric(m.errs, prometheus.CounterValue, float64(total.permanent), "permanent")
	ch <- prometheus.MustNewConstMetric(m.passes, prometheus.CounterValue, float64(total.full), "full")
	ch <- prometheus.MustNewConstMetric(m.passes, prometheus.CounterValue, float64(total.kicked), "kicked")
	ch <- prometheus.MustNewConstMetric(m.settled, prometheus.CounterValue, float64(total.settled))
	if iso.housekeeping != nil {
		ch <- prometheus.MustNewConstMetric(m.systemdUnreachable, prometheus.CounterValue, float64(total.systemdUnreachable))
	}
	if iso.irq != nil {
		ch <- prometheus.MustNewConstMetric(m.banned, prometheus.GaugeValue, float64(iso.irq.LastBanned().Size()))
		ch <- prometheus.MustNewConstMetric(m.movesPending, prometheus.GaugeValue, float64(iso.irq.MovesPending()))
	}
}

// changedAndWidened counts by owner the records of files still changed
// and those given back as near as the kernel takes (st.Nearest, whose
// owners st.NearestOwners names: the scrape reads no journal, which only
// the reconciler's passes may touch). A widened record stays in the journal for good
// while its cgroup has tasks (a host's system cgroup always has):
// counted as changed, it would keep cpupool_host_files_changed above 0,
// which the uninstall and privileged=false steps wait for.
func changedAndWidened(st hostfiles.Status) (changed, widened map[string]int) {
	changed, widened = maps.Clone(st.Records), map[string]int{}
	if changed == nil {
		changed = map[string]int{}
	}
	for _, path := range st.Nearest {
		if owner, ok := st.NearestOwners[path]; ok && changed[owner] > 0 {
			widened[owner]++
			changed[owner]--
		}
	}
	return changed, widened
}
