package plugin

// A config reload: SIGHUP, `systemctl reload`, the file changing
// (reloadwatch.go), or the runtime's Configure of a runtime-launched
// plugin. The new config is checked as validate checks it, then applied
// only if no running container and no hold of a stopped one has to move
// (allocator.Relayout); otherwise the old config stays in force and the
// log names each container and CPU in the way.

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/config/nodecheck"
	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/power"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// The results of a reload: the label values of cpupool_config_reloads_total.
const (
	ReloadApplied = "applied"
	ReloadRefused = "refused"
	ReloadInvalid = "invalid"
)

// ReloadPending is what status shows of a reload that waits for the
// runtime's first Synchronize (queuedReload); it is counted in
// cpupool_config_reloads_total once decided, under that result.
const ReloadPending = "pending"

// queuedReload is a valid reload that came before the first Synchronize
// (after a restart, before the runtime connects): the running containers
// are not known yet, the state file's may not even be read, so nothing
// tells whether the new pools would move one. Applied then, it would be
// reported applied unchecked, and a remembered exclusive container kept
// where it runs on CPUs the new layout gives to shared. It is checked, and
// applied or refused, right after that Synchronize; a later reload
// replaces it.
type queuedReload struct {
	cfg     *config.Config
	source  string
	trigger time.Time
}

// ReloadError is why a reload was not applied.
type ReloadError struct {
	// Result is ReloadRefused or ReloadInvalid, or ReloadPending for one
	// that waits for the first Synchronize (not applied yet).
	Result string
	// Blockers are the containers and holds a refused config would move.
	Blockers []allocator.Blocker
	Err      error
}

func (e *ReloadError) Error() string { return e.Err.Error() }
func (e *ReloadError) Unwrap() error { return e.Err }

// Reload applies a config read again, from source (for the log and
// status: "SIGHUP", "file changed", "NRI Configure"). A config that could
// not be read or parsed comes as loadErr: it is counted and shown as
// invalid. The checks that read the node (the layout, the power classes'
// files) are made before the lock is taken; under it, only the decision
// and the swap. It returns once the reload is applied: the new pools in
// force and the updates of the members that follow them answered by the
// runtime.
func (p *Plugin) Reload(cfg *config.Config, loadErr error, source string) error {
	return p.reload(cfg, loadErr, source, time.Now())
}

// reload is Reload for a trigger seen at trigger (the signal, the file's
// first event): the time until the reload is applied is measured from it.
func (p *Plugin) reload(cfg *config.Config, loadErr error, source string, trigger time.Time) error {
	if loadErr != nil {
		p.dropQueuedReload(source)
		err := &ReloadError{Result: ReloadInvalid, Err: fmt.Errorf("reload (%s): %w", source, loadErr)}
		p.reloadDone(source, trigger, nil, err, false)
		return err
	}
	p.mu.Lock()
	old, topo := p.cfg, p.topo
	p.mu.Unlock()
	plan, err := planReload(old, topo, cfg, p.log)
	var done *appliedReload
	if err != nil {
		p.dropQueuedReload(source)
	} else {
		p.mu.Lock()
		if !p.synced {
			p.queueReloadLocked(&queuedReload{cfg: cfg, source: source, trigger: trigger})
			p.mu.Unlock()
			return p.reloadWaits(source, trigger)
		}
		if p.cfg != old || p.topo != topo {
			// Another reload or a hotplug came first: plan again on what
			// is in force now (rare; the lock is held for it).
			plan, err = planReload(p.cfg, p.topo, cfg, p.log)
		}
		if err == nil {
			done, err = p.applyReload(plan, source)
		}
		p.mu.Unlock()
	}
	if _, decided := err.(*ReloadError); err != nil && !decided {
		err = &ReloadError{Result: ReloadInvalid, Err: fmt.Errorf("reload (%s): %w", source, err)}
	}
	if done != nil && done.restartIsolation {
		p.restartIsolation()
	}
	p.reloadDone(source, trigger, done, err, true)
	return err
}

// queueReloadLocked keeps q for the first Synchronize, in place of any
// reload queued before it. Called under the lock.
func (p *Plugin) queueReloadLocked(q *queuedReload) {
	if prev := p.queuedReload; prev != nil {
		p.log.Infof("reload (%s), waiting for the runtime's first Synchronize, is replaced by reload (%s)", prev.source, q.source)
	}
	p.queuedReload = q
}

// dropQueuedReload forgets a queued reload because a later one (source)
// was invalid: the file as it reads now is what was asked for, and, as
// after any invalid reload, the config in force stays.
func (p *Plugin) dropQueuedReload(source string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev := p.queuedReload; prev != nil && !p.synced {
		p.log.Warnf("reload (%s), waiting for the runtime's first Synchronize, is dropped: reload (%s) is invalid", prev.source, source)
		p.queuedReload = nil
	}
}

// reloadWaits tells (log and status, not the reloads' count, which
// counts it once decided) that a reload waits for the first Synchronize.
func (p *Plugin) reloadWaits(source string, trigger time.Time) error {
	err := &ReloadError{Result: ReloadPending, Err: fmt.Errorf("reload (%s) waits for the runtime's first Synchronize: until then the running containers are not known, so whether the new pools would move one cannot be checked; it is checked, and applied or refused, right after it", source)}
	p.log.Infof("%v", err)
	p.noteStatus(func(s *DaemonStatus) {
		if s.LastReload != nil && s.LastReload.Trigger.After(trigger) {
			return
		}
		s.LastReload = &ReloadStatus{Time: time.Now().UTC(), Trigger: trigger.UTC(), Source: source, Result: ReloadPending, Reason: err.Error()}
	})
	return err
}

// applyQueuedReloadLater checks, and applies or refuses, the reload queued
// before the first Synchronize, which has just placed the running
// containers. Called under the lock at its end: the reload waits for the
// lock, so it is decided after the Synchronize's reply is made.
func (p *Plugin) applyQueuedReloadLater() {
	q := p.queuedReload
	if q == nil {
		return
	}
	p.queuedReload = nil
	p.log.Infof("reload (%s) waited for the first Synchronize: checking it now", q.source)
	// Close waits for it: a reload that ran on after Close would write
	// through a state writer and host files already closed.
	p.queuedReloads.Add(1)
	proflabel.Go(proflabel.Reload, func() {
		defer p.queuedReloads.Done()
		p.reload(q.cfg, nil, q.source, q.trigger) //nolint:errcheck // counted, logged and shown in status
	})
}

// reloadLocked is Reload for a caller that holds the lock (Configure).
func (p *Plugin) reloadLocked(cfg *config.Config, source string) (*appliedReload, error) {
	plan, err := planReload(p.cfg, p.topo, cfg, p.log)
	if err != nil {
		return nil, &ReloadError{Result: ReloadInvalid, Err: fmt.Errorf("reload (%s): %w", source, err)}
	}
	return p.applyReload(plan, source)
}

// appliedReload is what an applied reload leaves to finish outside the
// lock: the host files' sources to make again, and the updates of the
// members that follow the pools, which the runtime answers in the
// background.
type appliedReload struct {
	restartIsolation bool
	// moved counts the containers whose cpuset the reload changed; push
	// is their update, nil when none was sent (none moved, or the runtime
	// takes them with the next reply).
	moved int
	push  *pushed
	// pools describes the layout now in force.
	pools string
	// inForce is when the new pools were in force and the members'
	// updates sent: the plugin's own part of the reload, before the
	// runtime answers them.
	inForce time.Time
}

// reloadPlan is a config checked against the node as validate checks it,
// and the config and topology it was checked against.
type reloadPlan struct {
	old, cfg *config.Config
	topo     *sysfs.Topology
	layout   *allocator.Layout
	problems config.Problems
	// powerRefusals are the power classes this node refuses
	// (power.unsupported: refuse).
	powerRefusals map[string]string
}

// planReload checks cfg as the config that replaces old on topo. It needs
// no lock: it reads the node's power files, not the plugin.
func planReload(old *config.Config, topo *sysfs.Topology, cfg *config.Config, log *logrus.Logger) (*reloadPlan, error) {
	// Where the state and the node are read is the daemon's identity: the
	// state directory's lock, the journal of host files and the topology
	// are theirs.
	if cfg.StateFile != old.StateFile {
		return nil, fmt.Errorf("stateFile cannot change from %s to %s while running; restart the daemon to move it", old.StateFile, cfg.StateFile)
	}
	if cfg.SysfsRoot != old.SysfsRoot {
		return nil, fmt.Errorf("sysfsRoot cannot change from %s to %s while running; restart the daemon", old.SysfsRoot, cfg.SysfsRoot)
	}
	if problems := cfg.Check(); problems.HasErrors() {
		return nil, problems.Errors().In("configuration")
	}
	cfg = ptrClone(cfg)
	keepRestartOnly(old, cfg, log)
	layout, problems := nodecheck.Check(topo, cfg)
	if problems.HasErrors() {
		return nil, problems.Errors().In("configuration")
	}
	return &reloadPlan{old: old, cfg: cfg, topo: topo, layout: layout, problems: problems, powerRefusals: power.NewNode(cfg.SysfsRoot, topo).Refusals(cfg)}, nil
}

// ptrClone is a shallow copy: keepRestartOnly changes the copy's fields,
// never the caller's config.
func ptrClone(cfg *config.Config) *config.Config {
	c := *cfg
	return &c
}

// applyReload decides a planned reload under the lock and, if no running
// container, hold, kubelet allocation or prepared claim has to move,
// applies it. The result tells what is left to finish outside the lock:
// closing the reconciler waits for its pass, which takes the lock.
func (p *Plugin) applyReload(plan *reloadPlan, source string) (*appliedReload, error) {
	next, blockers := p.alloc.Relayout(plan.layout)
	blockers = append(blockers, p.grantBlockers(plan.layout)...)
	blockers = append(blockers, p.claimBlockers(plan.layout)...)
	blockers = append(blockers, p.offlineBlockers(plan.old, plan.cfg, plan.topo, plan.layout, blockers)...)
	if len(blockers) > 0 {
		names := make([]string, 0, len(blockers))
		for _, b := range blockers {
			p.log.Warnf("reload (%s) refused: %s would move: %s", source, b.Who, b)
			names = append(names, fmt.Sprintf("%s (CPUs %s)", b.Who, b.CPUs))
			p.eventReloadBlocked(b, source)
		}
		return nil, &ReloadError{Result: ReloadRefused, Blockers: blockers,
			Err: fmt.Errorf("reload (%s) refused: the new pools would move %s; the old config stays in force", source, strings.Join(names, ", "))}
	}
	for _, w := range plan.problems.Warnings() {
		p.log.Warnf("config: %s", w)
	}
	cfg := plan.cfg
	infraBefore := p.alloc.PoolCPUs(pools.Infra)
	before := p.alloc.Layout()
	p.cfg = cfg
	moved, push := p.swapAllocator(next)
	p.policy = allocator.NewPolicy(cfg, p.topo)
	p.policy.SetPowerRefusals(plan.powerRefusals)
	if level, err := logrus.ParseLevel(cfg.LogLevel); err == nil && level != p.log.GetLevel() {
		p.log.SetLevel(level)
	}
	if !infraBefore.Equals(p.alloc.PoolCPUs(pools.Infra)) {
		p.pinSandboxesLater()
	}
	restart := isolationChanged(plan.old, cfg, before, p.alloc.Layout())
	if restart {
		p.warnIsolcpusUnkept()
	}
	return &appliedReload{restartIsolation: restart, moved: moved, push: push, pools: plan.layout.Describe(), inForce: time.Now()}, nil
}

// swapAllocator makes next the plugin's allocator (its containers and
// holds those of the last one, carried over: Relayout, Rebase) and tells
// everyone who follows the pools: the members whose cpuset changed (an
// update now and with the next reply), the state file, the metrics, the
// device plugin and the DRA driver. It returns how many containers'
// cpusets changed and their update, nil when none was sent.
func (p *Plugin) swapAllocator(next *allocator.Allocator) (int, *pushed) {
	before := map[string]string{}
	for _, a := range p.alloc.Assignments() {
		before[a.ID] = a.Cpuset().String()
	}
	p.alloc = next
	p.recountClaimMemory()
	if !p.synced {
		// Before the first Synchronize the allocator holds nobody, and
		// memory is the state file's, which Synchronize reconciles with
		// the runtime under the new pools.
		p.publishUsage()
		p.notify()
		return 0, nil
	}
	var moved []string
	for _, a := range p.alloc.Assignments() {
		if was, ok := before[a.ID]; ok && was != a.Cpuset().String() {
			p.pending[a.ID] = true
			moved = append(moved, a.ID)
		}
	}
	p.rememberAssignments()
	p.stateChanged()
	if len(moved) == 0 {
		return 0, nil
	}
	p.log.Infof("pools changed: updating %d containers that follow them", len(moved))
	return len(moved), p.pushLater(moved)
}

// eventReloadBlocked tells a running container's pod that a reload was
// refused because of it: an operator's change waits for it to end. Holds
// and pending allocations have no running container to tell. Called
// under the lock.
func (p *Plugin) eventReloadBlocked(b allocator.Blocker, source string) {
	if !p.wantsEvents() || b.Held || b.Pending {
		return
	}
	a, ok := p.alloc.Get(b.ID)
	if !ok {
		return
	}
	p.postEvent(a.Pod, true, EventReloadBlocked, fmt.Sprintf("nri-cpupool's new config (%s) was not applied: it would move container %s (pool %s, CPUs %s): %s; the old config stays in force until the container ends or the config keeps its CPUs", source, a.Container, b.Pool, b.CPUs, b.Reason))
}

// grantBlockers are the kubelet's allocations of cpupool.dev/exclusive
// that no container shows yet (the kubelet allocated them, the container
// is about to be created) whose CPUs the layout takes out of the
// exclusive pool: the creation would be refused. Bound ones are their
// containers' and holds' (Relayout). Offline CPUs are judged apart
// (offlineBlockers): the layout has them in no pool.
func (p *Plugin) grantBlockers(layout *allocator.Layout) []allocator.Blocker {
	var out []allocator.Blocker
	for _, tok := range slices.Sorted(maps.Keys(p.grants.byToken)) {
		g := p.grants.byToken[tok]
		if g.PodUID != "" {
			continue
		}
		if off := g.cpusOf().Intersection(layout.Online).Difference(layout.Exclusive); !off.IsEmpty() {
			out = append(out, allocator.Blocker{Who: "kubelet allocation " + tok, Pool: pools.Exclusive, CPUs: off, Pending: true,
				Reason: fmt.Sprintf("the kubelet allocated CPUs %s as %s devices, and the container has not been created yet", g.CPUs, config.ResourceExclusive)})
		}
	}
	return out
}

// claimBlockers are the requests of prepared DRA claims whose containers
// have not started (no container showed their token yet) whose CPUs the
// layout takes out of their pool: the container's creation would be
// refused, and the claim would have to be prepared again. Bound requests
// are their containers' and holds' (Relayout). Offline CPUs are judged
// apart (offlineBlockers): the layout has them in no pool. The driver's
// lock is taken under the plugin's, as Bind's is.
func (p *Plugin) claimBlockers(layout *allocator.Layout) []allocator.Blocker {
	if p.claims == nil {
		return nil
	}
	var out []allocator.Blocker
	for _, c := range p.claims.Pending() {
		if off := c.CPUs.Intersection(layout.Online).Difference(layout.Pool(c.Pool)); !off.IsEmpty() {
			out = append(out, allocator.Blocker{Who: "DRA claim " + c.Claim, Pool: c.Pool, CPUs: off, Pending: true,
				Reason: fmt.Sprintf("the claim was prepared with CPUs %s of pool %s for pods %s, whose container has not started yet", c.CPUs, c.Pool, strings.Join(c.Pods, ", "))})
		}
	}
	return out
}

// keepRestartOnly keeps the old values of the keys a running daemon
// cannot change (the runtime connection, the served endpoints, the
// directories it was started with, whether memory is pinned, which would
// change every running container's mems), and says so (to log, if not
// nil).
func keepRestartOnly(old, cfg *config.Config, log *logrus.Logger) {
	keys := []struct {
		key      string
		old, new any
	}{
		{"nriSocket", &old.NRISocket, &cfg.NRISocket},
		{"pluginIndex", &old.PluginIndex, &cfg.PluginIndex},
		{"metricsAddress", &old.MetricsAddress, &cfg.MetricsAddress},
		{"cgroupRoot", &old.CgroupRoot, &cfg.CgroupRoot},
		{"procRoot", &old.ProcRoot, &cfg.ProcRoot},
		{"pinMemory", &old.PinMemory, &cfg.PinMemory},
		{"kubelet", &old.Kubelet, &cfg.Kubelet},
		{"dra", &old.DRA, &cfg.DRA},
		{"kubernetes", &old.Kubernetes, &cfg.Kubernetes},
	}
	for _, k := range keys {
		o, n := reflect.ValueOf(k.old).Elem(), reflect.ValueOf(k.new).Elem()
		if !reflect.DeepEqual(o.Interface(), n.Interface()) {
			if log != nil {
				log.Warnf("reload: %s changes only at the next restart; it stays as it is", k.key)
			}
			n.Set(o)
		}
	}
}

// isolationChanged tells whether the host files' sources depend on what
// the reload changed: IRQ isolation, partitions, housekeeping and power
// classes are chosen per pool, the isolcpus= CPUs kept free of host
// processes node-wide, and the reconciler's sources are made for the
// config and the pools they were opened with. The pools are compared as
// laid out (layoutMoved), not by the keys that lay them out: a reload
// changing only isolatedCPUs or reservedCPUs moves the isolcpus= CPUs
// into the pools as surely as pools.* does, and was missed when a hand
// list of keys decided.
func isolationChanged(old, cfg *config.Config, oldLayout, layout *allocator.Layout) bool {
	return !reflect.DeepEqual(old.Pools, cfg.Pools) || !reflect.DeepEqual(old.IRQ, cfg.IRQ) ||
		!reflect.DeepEqual(old.Power, cfg.Power) || old.KeepHostOffIsolcpus != cfg.KeepHostOffIsolcpus ||
		old.KernelWork != cfg.KernelWork || layoutMoved(oldLayout, layout)
}

// layoutMoved tells whether a CPU changed pools, or became reserved,
// isolated or lendable, between two layouts: every set the isolation
// sources are made from (isolcpusKept, housekeepingKept, the IRQ and
// power sources' pools).
func layoutMoved(a, b *allocator.Layout) bool {
	if a == nil || b == nil {
		return a != b
	}
	for _, s := range []struct{ x, y cpuset.CPUSet }{{a.Exclusive, b.Exclusive}, {a.Shared, b.Shared}, {a.Infra, b.Infra},
		{a.ExclusiveNonIsolcpus, b.ExclusiveNonIsolcpus}, {a.Reserved, b.Reserved}, {a.Isolated, b.Isolated}} {
		if !s.x.Equals(s.y) {
			return true
		}
	}
	return false
}

// restartIsolation makes the host files' sources again for the config
// now in force: the reconciler restores nothing when it closes, and the
// new one reads the journal of originals and restores, exactly, what the
// new config no longer wants (a power class removed, IRQ isolation turned
// off) in its first pass. It must not be called with the lock held.
func (p *Plugin) restartIsolation() {
	// One restart at a time (a reload and a hotplug may both ask): the
	// one that closes a reconciler is the one that opens the next.
	p.isolationRestart.Lock()
	defer p.isolationRestart.Unlock()
	if p.isolationClosed {
		return // the plugin is stopping
	}
	p.mu.Lock()
	iso := p.isolation.Load()
	if iso == nil || !p.loaded {
		p.mu.Unlock()
		return // opened at the next Configure or retry (journalopen.go), with the config then in force
	}
	// Until this reconciler is closed, no Configure opens the journal
	// (loadState): the pass in flight may still record originals in it,
	// which a journal read before then would lack; its reconciler would
	// never put them back, and its next write would replace them on disk
	// by the values this plugin wrote. The next reconciler
	// is opened below, once the pass is done, and kicked if a Synchronize
	// came meanwhile.
	p.isolationClosing = true
	p.isolation.Store(nil)
	p.mu.Unlock()
	iso.recon.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isolationClosing = false
	// Closed, it counts no more: the next reconciler's counters start
	// from its totals (isolationtotals.go).
	p.hostFilesBefore = iso.totals()
	// Its IRQ Source's writes are handed to the next one (openIsolation),
	// also if the journal opens only at a retry.
	p.irqOwnWritesFrom = iso.irq
	// A journal that cannot be opened now is retried in the background
	// (journalopen.go).
	p.openIsolationOrDegrade()
	if iso := p.isolation.Load(); iso != nil && p.synced {
		iso.recon.Kick()
	}
}

// reloadPushWait bounds how long a reload's measure waits for the
// runtime to answer the members' updates: the reload is in force, and a
// runtime that does not answer is logged, not waited for.
const reloadPushWait = 10 * time.Second

// reloadDone counts a reload, logs it, and shows it in status, with the
// time from its trigger until it was applied (the members' updates
// answered: it waits for them) or decided. decided tells that the lock
// was taken (the log has the reason of a refusal).
func (p *Plugin) reloadDone(source string, trigger time.Time, done *appliedReload, err error, decided bool) {
	result, reason, updated := ReloadApplied, "", 0
	if err != nil {
		result, reason = ReloadInvalid, err.Error()
		if re, ok := err.(*ReloadError); ok {
			result = re.Result
		}
		if result == ReloadInvalid || !decided {
			p.log.Errorf("%v; the old config stays in force", err)
		}
	}
	if done != nil && done.push != nil {
		select {
		case <-done.push.done:
			updated = done.push.updated
		case <-time.After(reloadPushWait):
			p.log.Warnf("reload (%s): the runtime has not answered the update of %d containers in %s; they follow at the next reply", source, done.moved, reloadPushWait)
		}
	}
	took := time.Since(trigger)
	var inForce time.Duration
	if done != nil {
		inForce = done.inForce.Sub(trigger)
		p.log.Infof("reload (%s) applied in %s, in force after %s (%d of %d containers that follow the pools updated): pools: %s",
			source, durationMS(took), durationMS(inForce), updated, done.moved, done.pools)
	}
	p.noteStatus(func(s *DaemonStatus) {
		if s.LastReload != nil && s.LastReload.Trigger.After(trigger) {
			return // a later reload was shown first (a Configure's measure waits in the background)
		}
		s.LastReload = &ReloadStatus{Time: time.Now().UTC(), Trigger: trigger.UTC(), Source: source, Result: result, Reason: reason,
			DurationMS: float64(took.Microseconds()) / 1000, InForceMS: float64(inForce.Microseconds()) / 1000, Updated: updated}
		// Set with status, in the order of the reloads' triggers: a
		// refused or invalid reload leaves the old config in force, and
		// nothing but this gauge (and its alert) tells it once the log
		// has scrolled; the next reload applied clears it.
		p.metrics.reloadNotApplied.Set(boolGauge(result != ReloadApplied))
	})
	p.metrics.reloads.WithLabelValues(result).Inc() // last: status shows it once counted
	p.metrics.reloadSeconds.WithLabelValues(result).Observe(took.Seconds())
}

// durationMS prints a duration in milliseconds, to a tenth.
func durationMS(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}
