// Package plugin is the NRI glue: it turns runtime events into allocator
// decisions and those into container adjustments and updates, pins pod
// sandboxes through cgroupfs and keeps the state file (package state) up to
// date in the background.
//
// A file per question:
//
//   - plugin.go: the Plugin and its life (New, loading, configuration,
//     Flush, Close, Shutdown).
//   - run.go: the connection to the runtime, reconnects, and the NRI events
//     subscribed to (handledEvents).
//   - synchronize.go: the reconciliation with the runtime after a
//     (re)connect, by the allocator's recovery rules.
//   - containers.go: the container handlers (create, update, stop, remove)
//     and the refusal of a container (refuse).
//   - resize.go: a running container's in-place resize.
//   - sandboxes.go: the pod handlers and the sandboxes the plugin knows.
//   - sandboxpins.go: the background pinning of pod sandboxes; cgroup.go
//     the cgroupfs writes it makes.
//   - memory.go: the record of decisions kept across restarts;
//     statewriter.go writes it (and the grants file) in the background.
//   - kubelet.go: the kubelet device plugin's side (devices, preferred CPUs,
//     grants); grants.go the grants, grantsfile.go their file.
//   - dra.go: the DRA driver's side (claims' CPUs placed, bound, released).
//   - devices.go: the NUMA nodes of a container's devices.
//   - convert.go: translations between NRI's types and the allocator's.
//   - withshared.go: the record of exclusive containers with a shared part.
//   - isolation.go: IRQs kept off exclusive CPUs and isolated partitions,
//     through the host files' reconciler.
//   - power.go: power classes on the node, through the same reconciler.
//   - audit.go: the background isolation audit and its metrics.
//   - metrics.go: the Prometheus metrics, read from published usage.
//   - instrument.go: the handlers' latency histogram; creationclocks.go
//     CreateContainer's phases by wall and thread CPU clock, a diagnostic
//     (--handler-clocks).
//   - runtimeinfo.go: what the runtime said about itself.
//   - reload.go: a config reload, applied only if nobody moves;
//     reloadwatch.go what asks for one (SIGHUP, the file changing). The
//     check of a config against the node that the start, a reload and
//     `validate` share is config/nodecheck's.
//   - hotplug.go: CPUs going offline and online.
//   - push.go: updates sent to the runtime outside a reply.
//   - daemonstatus.go: the daemon's status file for `nri-cpupool status`.
package plugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/config/nodecheck"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/internal/handlerclock"
	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/irq"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// Environment variables given to every container: CMK's CMK_CPUS_ASSIGNED,
// without a wrapper. They describe the assignment at creation; shared and
// infra containers follow their pool later through cgroups only.
const (
	EnvCPUs = "CPUPOOL_CPUS"
	EnvMems = "CPUPOOL_MEMS"
	EnvPool = "CPUPOOL_POOL"
	// EnvExclusiveCPUs and EnvSharedCPUs tell a container with exclusive
	// and shared CPUs (shared-cpus.cpupool.dev) which of CPUPOOL_CPUS are
	// which, for it to pin its threads (withshared.go).
	EnvExclusiveCPUs = "CPUPOOL_EXCLUSIVE_CPUS"
	EnvSharedCPUs    = "CPUPOOL_SHARED_CPUS"
)

// Plugin handles NRI events. One mutex serializes decisions and state.
type Plugin struct {
	mu sync.Mutex
	// hugePageReads numbers the hugepage readings (readHugePages), some
	// taken before the lock (a DRA reservation's), so that the allocator
	// keeps the newest of two that race for it.
	hugePageReads atomic.Uint64
	// readHugePager is readHugePages, made once: a creation hands it to
	// the allocator.
	readHugePager allocator.HugePageReader
	// events posts Events on pods (podevents.go), when set; read without
	// the lock, since a refusal of bounded input answers before it.
	events eventsRef
	// seesHostThreads: ProcRoot shows the host's PID namespace
	// (housekeeping.SeesHostThreads), which keepHostOffIsolcpus needs.
	seesHostThreads bool
	cfg             *config.Config
	topo            *sysfs.Topology
	alloc           *allocator.Allocator
	policy          *allocator.Policy
	store           state.Store
	// stateLock is the state directory's lock (KeepStateLock), nil in
	// tests that run one plugin per directory.
	stateLock *state.DirLock
	pinner    *cgroupPinner
	log       *logrus.Logger
	// decisions takes each creation's decision line: log, unless the
	// daemon's sink formats it off the reply's path (LogDecisionsTo).
	decisions DecisionLog
	// clocks times CreateContainer's phases (TimeCreations); nil, and
	// nothing timed, unless the daemon runs with --handler-clocks. Atomic:
	// CreateContainer reads it before it takes the lock, so that the
	// first phase (the input's checks) is timed too.
	clocks atomic.Pointer[handlerclock.Recorder]
	// hugePages reads the hugepage counts through files it keeps open; closed
	// when Run returns.
	hugePages *sysfs.HugePageCounter
	// loaded tells that the state file has been read: it is read once,
	// before the first Synchronize; synced, that a Synchronize has
	// reconciled it.
	loaded, synced bool
	// conn follows the connection to the runtime for readiness, without
	// the lock (health.go).
	conn runtimeConn
	// exit is what the daemon's way out (Run's last steps, Close) has
	// spent of its bound (exitbudget.go).
	exit exitBudget
	// queuedReload is a reload that came before the first Synchronize,
	// decided right after it (reload.go).
	queuedReload *queuedReload
	// queuedReloads are the queued reloads being decided (reload.go),
	// which Close waits for.
	queuedReloads sync.WaitGroup
	// memory is what survives a restart, in the state file's form: read
	// from the file, then kept equal to the allocator's assignments by each
	// decision (recordPlacement, recordRelease), so that a write does not
	// re-derive them. The writer persists it (with the holds and pools,
	// which it takes from the allocator) in the background. Synchronize
	// reconciles it with the runtime.
	memory *state.State
	// gen counts changes to memory, the allocator's holds and the pools;
	// dirty are the containers changed since the writer last collected
	// them (all of them after Synchronize: dirtyAll).
	gen      uint64
	dirty    map[string]bool
	dirtyAll bool
	// refusalsDirty tells that memory's refusals changed since the
	// writer last collected them (refusals.go).
	refusalsDirty bool
	// writer persists the state in the background, off the reply path.
	writer *stateWriter
	// sandbox are the pod sandboxes to keep pinned to infra, by id, and
	// podSandboxes counts them by pod UID, so that a sandbox's stop asks
	// whether its pod lives on without a walk over every pod; both change
	// through addSandbox and dropSandbox only.
	sandbox      map[string]sandbox
	podSandboxes map[string]int
	pins         sandboxPins // pins them in the background (sandboxpins.go)
	// seen are the names of the containers created in each sandbox seen
	// from its start, by sandbox id (unmatched.go).
	seen map[string]*seenContainers
	// localities are device NUMA nodes already found (devices.go).
	localities localityCache
	overrode   map[string]bool // containers whose cpuset change we refused, logged once
	// memsOverrode are containers whose mems change we refused, logged
	// and counted once (foreignmems.go).
	memsOverrode map[string]bool
	metrics      *metrics
	// usage is the pools' usage for the metrics, published by the state
	// writer's collection (a few milliseconds after a decision) rather
	// than by each decision: computing it walks every container and CPU,
	// which the reply path cannot afford.
	usage usageSnapshot
	// pending are containers whose cpuset changed in a handler that cannot
	// return updates (RemoveContainer, RemovePodSandbox); the next reply
	// carries them (see deferFollowers).
	pending map[string]bool
	// ended are the containers last seen stopping or removed, which a
	// late PostStartContainer must not adopt (startrace.go).
	ended endedRuns
	// runtime is what the connected runtime said about itself (for
	// cpupool_runtime_info).
	runtime runtimeInfo
	// nriVersion reports the runtime's NRI version on the current
	// connection (the NRI stub's view); set by Run. Not under mu: Run sets
	// it on each reconnect, and a handler stuck under the lock must not
	// keep Run from reaching the way out. assumeNRIVersion, if set,
	// replaces it (tests play old runtimes with today's NRI library).
	nriVersion       atomic.Pointer[func() string]
	assumeNRIVersion string
	// beforeReply, when set (by tests), runs after a handler has recorded
	// its decision in memory and before it replies: where a crash hurts
	// most.
	beforeReply func(event, id string)
	// grants are the kubelet's allocations of cpupool.dev/exclusive;
	// changed tells the device plugin to re-read the devices.
	grants  *grants
	changed chan struct{}
	// claimMemory are the memory reservations of the prepared DRA claims,
	// by key (dramem.go), counted again in every new allocator.
	claimMemory map[string]numamem.ClaimMemory
	// isolation changes host files (IRQ affinities) in the background
	// (isolation.go); set once the state is loaded, read by metrics
	// without the lock. isolationTiming paces it and isolationFS is its
	// file access (tests shorten the one and inject kernel errors into the
	// other).
	isolation       atomic.Pointer[isolation]
	isolationTiming hostfiles.Timing
	isolationFS     hostfiles.FS
	// cgroups are the cgroups of running containers whose cgroup is an
	// isolated partition, by id: their paths from the runtime, and what
	// partitionWants makes of them.
	cgroups map[string]partitionCgroup
	// auditor audits the held exclusive CPUs every minute for the metrics,
	// once they are served (audit.go).
	auditor atomic.Pointer[auditor]
	// claims binds containers to DRA claims when the DRA driver is on
	// (dra.go); nil otherwise.
	claims ClaimBinder
	// status is the last reload and the connection to the runtime, for
	// `nri-cpupool status` (daemonstatus.go), under statusMu, which also
	// orders its writes; statusFile is where it goes, beside the state
	// file Configure may name, read without the plugin's lock: the
	// daemon's way out records "stopped" while a handler holds it.
	status     DaemonStatus
	statusMu   sync.Mutex
	statusFile atomic.Pointer[string]
	// statusClosed, under statusMu, is set by Close before it releases
	// the state directory's lock: a reload still being measured then (a
	// Configure's in the background, a watched file's) writes no status
	// over the next process's.
	statusClosed bool
	// statusQueued is set while a background write of the connection's
	// state (noteRuntime) is queued and has not yet read the latest.
	statusQueued atomic.Bool
	// push sends updates to the runtime outside a reply (push.go); nil
	// while not connected.
	push atomic.Pointer[pushFunc]
	// pluginIndex is the config's, stored by configure: Run reads it
	// without the lock, which a stuck handler may hold (exitbudget.go).
	// It changes only at a restart (keepRestartOnly).
	pluginIndex atomic.Int64
	// hotplug follows CPUs going online and offline (hotplug.go).
	hotplug hotplugWatch
	// seenCPUs is the place of every CPU seen present, under mu, so
	// that a hot-removed one is laid out as an offline one (remembered.go);
	// rememberMu orders its writes.
	seenCPUs   sysfs.Remembered
	rememberMu sync.Mutex
	// rememberedRead tells that the record was read whole at start
	// (else it is written at the first Synchronize, changed or not);
	// rememberWG are its writes under way, waited for by Close.
	rememberedRead bool
	rememberWG     sync.WaitGroup
	// rememberedNotRegular: the record's path was read and is not a
	// regular file, which was said (under mu); rememberFailed is the
	// last failed write's error, said once (under rememberMu).
	rememberedNotRegular bool
	rememberFailed       string
	// discovered is the topology the kernel shows, without the remembered
	// CPUs put back (topo is it with them), under mu: a runtime-launched
	// plugin reads the record again beside the state file Configure names
	// and puts back those instead (rememberedOf); rememberedGen counts
	// those readings, so that a hotplug check that read the record before
	// one puts back the new record's CPUs.
	discovered    *sysfs.Topology
	rememberedGen int
	// rememberedUnwritten: a CPU was remembered before the first
	// Synchronize, when nothing is written (rememberCPUs), under mu.
	rememberedUnwritten bool
	// saidDamage are the warnings on damaged records said since the last
	// Synchronize began, under mu (sayOnce).
	saidDamage map[string]bool
	// isolationRestart keeps the host files' reconciler made again by one
	// reload or hotplug at a time (restartIsolation), and closed for good
	// (isolationClosed, under it) by closeIsolation.
	isolationRestart sync.Mutex
	isolationClosed  bool
	// isolationClosing: restartIsolation is closing the reconciler and
	// opens the next one itself; loadState must not open the journal
	// meanwhile (under mu).
	isolationClosing bool
	// hostFilesBefore are the host files' counters of the reconcilers
	// closed so far, for the next one to carry (under mu).
	hostFilesBefore hostFileTotals
	// irqOwnWritesFrom is the IRQ Source of the reconciler
	// restartIsolation closed last, until the next reconciler takes its
	// own writes (openIsolation); nil otherwise (under mu).
	irqOwnWritesFrom *irq.Source
	// journal follows the journal's opening: a failure degrades
	// isolation, never pinning, and is retried (journalopen.go).
	journal journalOpen
}

// inTestBinary tells whether this is a Go test binary, whose testing
// package registers its -test.* flags on the global flag set (the daemon
// parses flag sets of its own): checked without linking testing into the
// daemon.
func inTestBinary() bool { return flag.Lookup("test.v") != nil }

// New builds a plugin for a node. The state is loaded here; it is
// reconciled with the runtime in Synchronize.
func New(cfg *config.Config, topo *sysfs.Topology, store state.Store, log *logrus.Logger) (*Plugin, error) {
	if inTestBinary() && cfg.StateFile == config.Default().StateFile {
		// A test's plugin beside the default state file writes this
		// machine's /var/lib/nri-cpupool (the daemon's status, the
		// journal of host originals, grants), whatever its store: a test
		// run did, and a daemon there would read them.
		return nil, fmt.Errorf("stateFile %s is the default, in a test binary: give the test a state file of its own (t.TempDir())", cfg.StateFile)
	}
	seen, read, notRegular := loadRemembered(sysfs.RememberedPath(cfg.StateFile), topo, log)
	p := &Plugin{topo: topo.WithRemembered(seen), discovered: topo, seenCPUs: seen, rememberedRead: read, rememberedNotRegular: notRegular, store: store, log: log, decisions: log, memory: state.NewState(), sandbox: map[string]sandbox{}, podSandboxes: map[string]int{}, seen: map[string]*seenContainers{}, overrode: map[string]bool{},
		memsOverrode: map[string]bool{},
		dirty:        map[string]bool{}, pending: map[string]bool{}, changed: make(chan struct{}, 1), cgroups: map[string]partitionCgroup{}}
	p.pins = newSandboxPins(&p.mu)
	p.hugePages = sysfs.NewHugePageCounter(cfg.SysfsRoot) // the root stays across reloads
	p.readHugePager = p.readHugePages
	p.isolationTiming, p.isolationFS = hostfiles.DefaultTiming, hostFilesFS(cfg)
	p.seesHostThreads = housekeeping.SeesHostThreads(cfg.ProcRoot) // the root stays across reloads
	p.localities = localityCache{}
	p.writer = newStateWriter(log, p.collectState)
	p.metrics = newMetrics(&p.usage, p.writer, &p.conn)
	g := p.loadGrants(GrantsFile(cfg.StateFile))
	g.file.removeStaleTemps() // nothing writes it yet
	p.grants = g
	if err := p.configure(cfg); err != nil {
		return nil, err
	}
	return p, nil
}

// hostFilesFS is the host files' access for the reconciler: the host's
// files, and systemd's unit properties for housekeeping under systemd
// (dialled only when first needed), and threads' affinities: only over
// the host's own /proc, since the system calls act on this kernel's
// threads whatever a fixture's /proc says. The daemon's and restore-host's
// (restorehost.go).
func hostFilesFS(cfg *config.Config) hostfiles.FS {
	var files hostfiles.FS = hostfiles.OS{}
	if filepath.Clean(cfg.ProcRoot) == "/proc" {
		files = housekeeping.NewAffinityFS(files, cfg.ProcRoot, housekeeping.KernelAffinity{})
	}
	return housekeeping.NewSystemdFS(files, housekeeping.DialSystemd, cfg.CgroupRoot)
}

// loadGrants reads the grants file; a damaged or unreadable one is moved
// aside (or left, not to be replaced, until it can be), logged and
// counted, and the grants start empty (see loadGrants): never an error,
// so that the grants file never stops pinning.
func (p *Plugin) loadGrants(path string) *grants {
	g, err := loadGrants(path, time.Now())
	if err != nil {
		p.log.Warnf("%v", err)
		p.metrics.countDiscarded(discardedGrants)
	}
	return g
}

// loadState reads the state once, before the first Synchronize: late, so
// that a runtime-launched plugin can take its state file from the runtime's
// configuration. Then the writer starts on that store. A state file that
// cannot be used is rebuilt from the runtime (state.ErrStateDiscarded),
// also when it cannot be moved aside: pinning never waits for the disk.
// The journal of host files is opened until it opens, at each Configure
// and Synchronize and in the background (journalopen.go): a journal that
// could not be read (an I/O error, or damaged and not movable aside on a
// read-only disk) degrades isolation and fails no Configure nor
// Synchronize, so that containers are pinned meanwhile, and
// a passing error does not leave the process without IRQ isolation,
// partitions and power classes, and the originals an earlier process
// recorded unrestored, for its whole life.
func (p *Plugin) loadState() error {
	if !p.loaded {
		st, err := p.store.Load()
		switch {
		case errors.Is(err, state.ErrStateDiscarded):
			p.log.Warnf("%v", err)
			p.metrics.countDiscarded(discardedState)
		case err != nil:
			// A Store other than FileStore (which rebuilds in every case).
			return fmt.Errorf("loading the state: %w", err)
		}
		p.memory, p.loaded = st, true
		p.writer.start(p.store, p.grants.file)
		if st.MigratedFrom != 0 {
			p.log.Infof("state: %s is schema version %d; migrated to %d, rewritten at the next write", p.cfg.StateFile, st.MigratedFrom, state.SchemaVersion)
		}
		p.log.Infof("state: %d containers remembered, to reconcile with the runtime", len(st.Containers))
	}
	// While a restart closes the reconciler, the journal is not read:
	// the restart opens it once the last pass has recorded its originals,
	// and kicks it if this connection has synchronized by then.
	if p.isolation.Load() == nil && !p.isolationClosing {
		p.openIsolationOrDegrade()
	}
	return nil
}

// Flush writes every decision made so far to the state file and makes it
// durable, now. It must not be called with the lock held.
func (p *Plugin) Flush() error {
	return p.writer.Flush()
}

// Close writes the last decisions, stops the writer and releases the state
// store's resources. It must not be called with the lock held: the final
// write collects the state under it. It waits at most what is left of the
// way out's bound (exitbudget.go; 5 s in all, Run's last writes included):
// a handler stuck under the plugin's lock, or a hung disk, leaves the rest
// to the process's exit, which releases the state directory's lock only
// once every thread is gone.
func (p *Plugin) Close() {
	if err := p.onTheWayOut("closing the plugin (the last state write, releasing the state directory)", func() error {
		p.close()
		return nil
	}); err != nil {
		p.log.Errorf("%v", err)
	}
}

// close is Close, unbounded.
func (p *Plugin) close() {
	p.queuedReloads.Wait()
	p.rememberWG.Wait()
	p.stopPinning()
	p.stopAuditing()
	p.closeIsolation()
	err := p.writer.Close()
	if err != nil {
		p.log.Errorf("final state write: %v", err)
	}
	// A status write under way ends first; none starts after.
	p.statusMu.Lock()
	p.statusClosed = true
	p.statusMu.Unlock()
	if errors.Is(err, errStateWriteStalled) {
		// The hung write still uses the store, and holds the directory:
		// both go with the process. Its exit releases the directory's lock
		// only once every thread is gone, the hung one too, so the write
		// can never land in a file a next process owns.
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.store.Close()
	// Last: the next process may read the files once this is released.
	if err := p.stateLock.Close(); err != nil {
		p.log.Warnf("releasing the state directory lock: %v", err)
	}
	p.stateLock = nil
}

// KeepStateLock hands the plugin the lock of its state directory, which
// the caller took before New read any of its files (state.Lock). The
// plugin releases it at Close, and moves it with the state file that a
// runtime's Configure names.
func (p *Plugin) KeepStateLock(l *state.DirLock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stateLock = l
}

// moveStateLock takes the lock of the directory of the state file that
// Configure names, if it is another, and lets the first one go, removing
// the lock file and directory that taking it created.
func (p *Plugin) moveStateLock(stateFile string) error {
	if p.stateLock == nil || state.LockPath(stateFile) == p.stateLock.Path() {
		return nil
	}
	l, err := state.TryLock(stateFile)
	if err != nil {
		return fmt.Errorf("stateFile %s: %w", stateFile, err)
	}
	if w := l.Warning(); w != "" {
		p.log.Warn(w)
	}
	// Nothing was written beside the first one (the state is loaded only
	// after Configure): what its lock created goes with it.
	p.stateLock.CloseUnused()
	p.stateLock = l
	return nil
}

func (p *Plugin) configure(cfg *config.Config) error {
	// The check validate makes too (nodecheck.Check): a listed CPU that is
	// offline is a warning, so that the daemon starts.
	layout, problems := nodecheck.Check(p.topo, cfg)
	for _, w := range problems.Warnings() {
		p.log.Warnf("config: %s", w)
	}
	if problems.HasErrors() {
		return problems.Errors().In("configuration")
	}
	p.cfg = cfg
	p.pluginIndex.Store(int64(cfg.PluginIndex))
	statusFile := DaemonStatusFile(cfg.StateFile)
	p.statusFile.Store(&statusFile)
	p.alloc = allocator.New(p.topo, layout, cfg.PinMemory)
	p.recountClaimMemory()
	p.policy = allocator.NewPolicy(cfg, p.topo)
	p.configurePower(cfg)
	p.pinner = newCgroupPinner(cfg.CgroupRoot)
	p.publishUsage()
	p.log.Infof("pools: %s", layout.Describe())
	p.log.Infof("sandboxes: %s", p.pinner.Hierarchy())
	p.warnIsolcpusUnkept()
	if p.changed != nil {
		p.notify()
	}
	return nil
}

// Configure receives the runtime's configuration for runtime-launched
// plugins: a non-empty config replaces the file's. Once a Synchronize has
// placed containers (the runtime reconnected), it is a reload: applied
// only if no running container has to move (reload.go), else the config in
// force stays, and Configure succeeds either way, so that the plugin keeps
// pinning.
func (p *Plugin) Configure(_ context.Context, cfg, runtime, version string) (api.EventMask, error) {
	trigger := time.Now()
	p.mu.Lock()
	if p.exit.begun.Load() {
		// Under the lock: the way out's last write and Close take it too.
		p.mu.Unlock()
		return 0, fmt.Errorf("configuring the plugin for %s %s: %w", runtime, version, errStopping)
	}
	reloaded, done, reloadErr, err := p.configureRuntime(cfg, runtime, version)
	p.mu.Unlock()
	if reloaded {
		if done != nil && done.restartIsolation {
			p.restartIsolation()
		}
		if done != nil && done.push != nil {
			// The runtime answers the members' updates once this call
			// returns, perhaps: the reload is measured in the background.
			proflabel.Go(proflabel.Reload, func() { p.reloadDone(reloadSourceNRI, trigger, done, reloadErr, true) })
		} else {
			p.reloadDone(reloadSourceNRI, trigger, done, reloadErr, true)
		}
	}
	if err != nil {
		return 0, err
	}
	return subscribed, nil
}

// reloadSourceNRI names a reload by the runtime's Configure.
const reloadSourceNRI = "NRI Configure"

// configureRuntime is Configure under the lock. reloaded tells that the
// config went through a reload's check (reloadErr, if it was not applied).
func (p *Plugin) configureRuntime(cfg, runtime, version string) (reloaded bool, done *appliedReload, reloadErr, err error) {
	p.runtime = runtimeInfo{name: runtime, version: version, nriVersion: api.UnknownVersion}
	switch {
	case p.assumeNRIVersion != "":
		p.runtime.nriVersion = p.assumeNRIVersion
	case p.nriVersion.Load() != nil:
		p.runtime.nriVersion = (*p.nriVersion.Load())()
	}
	p.log.Infof("connected to %s %s (NRI %s)", runtime, version, p.runtime.nriVersion)
	connected := p.runtime
	p.metrics.connected.Store(&connected)
	if strings.TrimSpace(cfg) != "" {
		parsed, err := config.Parse(strings.NewReader(cfg), "NRI plugin config")
		if err != nil {
			if p.synced {
				return true, nil, &ReloadError{Result: ReloadInvalid, Err: fmt.Errorf("reload (%s): %w", reloadSourceNRI, err)}, nil
			}
			return false, nil, nil, err
		}
		// The topology was read from the configured sysfs root; a state file
		// named here applies only before any state was loaded.
		parsed.SysfsRoot = p.cfg.SysfsRoot
		switch {
		case parsed.StateFile == config.Default().StateFile || parsed.StateFile == p.cfg.StateFile:
			parsed.StateFile = p.cfg.StateFile
		case !p.loaded:
			if err := p.moveStateLock(parsed.StateFile); err != nil {
				return false, nil, nil, err
			}
			p.store = state.NewFileStore(parsed.StateFile)
			p.grants = p.loadGrants(GrantsFile(parsed.StateFile))
			// The CPUs the hypervisor hot-removed are those remembered
			// beside this state file, where validate reads them.
			p.rememberedOf(parsed.StateFile)
		default:
			return false, nil, nil, fmt.Errorf("stateFile cannot change from %s to %s while running", p.cfg.StateFile, parsed.StateFile)
		}
		probe := *parsed
		keepRestartOnly(p.cfg, &probe, nil)
		if p.synced && reflect.DeepEqual(&probe, p.cfg) {
			// A reconnect with the config in force: nothing to reload.
		} else if p.synced {
			// Containers run: the same check as any reload.
			done, reloadErr = p.reloadLocked(parsed, reloadSourceNRI)
			reloaded = true
		} else if err := p.configure(parsed); err != nil {
			return false, nil, nil, err
		}
	}
	if err := p.loadState(); err != nil {
		return reloaded, done, reloadErr, err
	}
	return reloaded, done, reloadErr, nil
}

// Shutdown is called when the runtime closes the connection (it is
// stopping, perhaps with the node): the state file is brought up to date.
func (p *Plugin) Shutdown(context.Context) {
	p.log.Info("runtime shut the connection down")
	if err := p.Flush(); err != nil {
		p.log.Errorf("writing state at shutdown: %v", err)
	}
}
