package plugin

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// usageSource gives the pools' usage for a scrape. Implementations must
// not wait for the plugin's lock: a scrape never delays a handler, and a
// handler never waits for a scrape.
type usageSource interface {
	PoolUsage() []allocator.PoolUsage
	MemoryReport() []numamem.NodeMemoryReport
}

// usageSnapshot is the usage as of the plugin's last decision. The plugin
// publishes it under its lock; scrapes read it without any lock.
type usageSnapshot struct {
	last atomic.Pointer[[]allocator.PoolUsage]
	// memory is the NUMA nodes' memory, published with the usage: it
	// holds the hugepage counts last read, never reads them again.
	memory atomic.Pointer[[]numamem.NodeMemoryReport]
}

var _ usageSource = (*usageSnapshot)(nil)

func (s *usageSnapshot) publish(u []allocator.PoolUsage, mem []numamem.NodeMemoryReport) {
	s.last.Store(&u)
	s.memory.Store(&mem)
}

// PoolUsage returns the last published usage (none before the first).
func (s *usageSnapshot) PoolUsage() []allocator.PoolUsage {
	if u := s.last.Load(); u != nil {
		return *u
	}
	return nil
}

// MemoryReport returns the last published memory of the NUMA nodes (none
// before the first).
func (s *usageSnapshot) MemoryReport() []numamem.NodeMemoryReport {
	if m := s.memory.Load(); m != nil {
		return *m
	}
	return nil
}

// metrics are the plugin's Prometheus metrics: pool figures read from a
// usageSource, which never disagrees with the decisions it follows, the
// refusal counter, counted where refusals happen, and the state writer's
// counters.
type metrics struct {
	usage    usageSource
	poolCPUs *prometheus.Desc
	freeCPUs *prometheus.Desc
	members  *prometheus.Desc
	held     *prometheus.Desc
	// numaMemory and numaPages are each NUMA node's memory and hugepages
	// (docs/placement.md, "Memory follows the CPUs").
	numaMemory, numaPages *prometheus.Desc
	refused               *prometheus.CounterVec
	// writer's figures are read from its atomic counters, without a lock.
	writer                                          *stateWriter
	stateWrites, stateErrors, stateAge, stateBehind *prometheus.Desc
	// stateFailing and runtimeConnected are /readyz's checks as gauges
	// (health.go), read from the same atomics.
	stateFailing, runtimeConnected *prometheus.Desc
	// handlerInflight is the oldest handler under way's age (health.go).
	handlerInflight *prometheus.Desc
	conn            *runtimeConn
	// synchronized counts Synchronize calls: 1 after the first registration,
	// one more after each reconnect (a runtime restart).
	synchronized prometheus.Counter
	runtime      *prometheus.Desc
	// connected is the runtime of the last Configure, published like the
	// usage: scrapes read it without the plugin's lock.
	connected atomic.Pointer[runtimeInfo]
	resizes   *prometheus.CounterVec
	// discarded counts damaged files moved aside at start, by file.
	discarded *prometheus.CounterVec
	// partitionsSkipped counts containers placed without the isolated
	// partition their pool gives by default, by reason.
	partitionsSkipped *prometheus.CounterVec
	// startRepins counts cgroups pinned after Synchronize's update reached
	// only their container's spec (see startrace.go).
	startRepins prometheus.Counter
	// handlers times every NRI handler (see instrumented).
	handlers *prometheus.HistogramVec
	// foreignMems counts containers seen with mems the plugin did not
	// write, by event (foreignmems.go).
	foreignMems *prometheus.CounterVec
	// reloads counts config reloads by result, and reloadSeconds times
	// them from their trigger until applied or decided; hotplug, CPUs seen
	// going online and offline; offlineHeld is the CPUs containers and
	// holds keep while offline, as of the last change (reload.go,
	// hotplug.go). reloadNotApplied is 1 while the last reload decided was
	// refused or invalid: the config read is not the one in force.
	reloads          *prometheus.CounterVec
	reloadSeconds    *prometheus.HistogramVec
	reloadNotApplied prometheus.Gauge
	hotplug          *prometheus.CounterVec
	offlineHeld      prometheus.Gauge
	// unmatched counts container-scoped annotations whose container the
	// pod never created, counted when its sandbox stops (unmatched.go).
	unmatched prometheus.Counter
}

var _ prometheus.Collector = (*metrics)(nil)

// refusedSynchronize is the refusal counter's "reason" for running
// containers Synchronize could not place and confined to infra; refused
// creations count under the reasons their errors carry (allocator.ReasonOf).
const refusedSynchronize = "synchronize"

func newMetrics(usage usageSource, writer *stateWriter, conn *runtimeConn) *metrics {
	m := &metrics{
		usage:    usage,
		writer:   writer,
		conn:     conn,
		poolCPUs: prometheus.NewDesc("cpupool_pool_cpus", "CPUs in the pool now (infra shrinks while exclusive-non-isolcpus containers run).", []string{"pool"}, nil),
		freeCPUs: prometheus.NewDesc("cpupool_pool_free_cpus", "CPUs of an exclusive pool that no container holds.", []string{"pool"}, nil),
		members:  prometheus.NewDesc("cpupool_containers", "Containers assigned to the pool.", []string{"pool"}, nil),
		held:     prometheus.NewDesc("cpupool_held_cpus", "CPUs of an exclusive pool held for stopped containers until their pod's sandbox stops.", []string{"pool"}, nil),
		numaMemory: prometheus.NewDesc("cpupool_numa_memory_bytes",
			"Memory of each NUMA node, by state: capacity (MemTotal less the node's hugepage pools, as last read), reserved (memory.reservedPerNode), held (the memory limits of the containers and holds whose memory the plugin pins there) and free (what such a container may still have: capacity less reserved and held).",
			[]string{"node", "state"}, nil),
		numaPages: prometheus.NewDesc("cpupool_numa_hugepages",
			"Hugepages of each NUMA node, by size (2Mi, 1Gi) and state: total (nr_hugepages as last read), reserved (memory.reservedHugePagesPerNode), held (the hugepage limits of the containers and holds whose memory the plugin pins there) and free (what such a container may still have: total less reserved and held, and no more than free_hugepages as last read).",
			[]string{"node", "size", "state"}, nil),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cpupool_refused_containers_total",
			Help: "Container creations refused, by reason (annotation, namespace, grant, claim, placement, power), and running containers Synchronize could not place and confined to infra (synchronize).",
		}, []string{"reason"}),
		synchronized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cpupool_runtime_synchronizations_total",
			Help: "Times the runtime synchronized the plugin: at registration and after every reconnect.",
		}),
		runtime: prometheus.NewDesc("cpupool_runtime_info",
			"The connected runtime and the NRI version it embeds.",
			[]string{"runtime", "version", "nri_version"}, nil),
		resizes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cpupool_resizes_total",
			Help: "In-place resizes (CPU request changes) by pool and result (grown, shrunk, unchanged, refused).",
		}, []string{"pool", "result"}),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cpupool_files_discarded_total",
			Help: "Damaged or unreadable files set aside when loaded (file: state, kubelet-grants, dra-claims); what they held is rebuilt from the runtime, or lost (dra-claims).",
		}, []string{"file"}),
		partitionsSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cpupool_isolated_partitions_skipped_total",
			Help: "Exclusive containers placed without the isolated partition their pool gives by default (isolatedPartition: optOut), by reason (shared-cpus: they run on the shared pool too, which a partition would take from them).",
		}, []string{"reason"}),
		startRepins: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cpupool_start_repins_total",
			Help: "Containers the runtime started on the CPUs of their spec from before Synchronize (its update reached only the spec), whose cgroup the plugin then pinned through cgroupfs.",
		}),
		foreignMems: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cpupool_foreign_mems_total",
			Help: "Containers seen with cpuset.mems the plugin did not write (another memory policy, such as the kubelet's Memory Manager, sets them), by event: create (a spec whose mems the plugin replaces), update (a request the plugin answers with its own mems) or synchronize (a running container, counted on its mems as they are).",
		}, []string{"event"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cpupool_config_reloads_total",
			Help: "Config reloads (SIGHUP, systemctl reload, the file changing, the runtime's Configure) by result: applied, refused (a running container or a hold would move; the log names each) or invalid (the file does not parse, fails validate's checks, or changes stateFile or sysfsRoot).",
		}, []string{"result"}),
		reloadSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cpupool_config_reload_seconds",
			Help: "Time from a config reload's trigger (the signal, the file's first change, the runtime's Configure) until it was applied (the new pools in force and the updates of the containers that follow them answered by the runtime) or refused, by result.",
			// From a millisecond to the second the budget allows,
			// and beyond for emulated machines.
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"result"}),
		reloadNotApplied: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cpupool_config_reload_not_applied",
			Help: "1 while the last config reload decided was refused or invalid: the config read (the file, the runtime's Configure) is not the one in force, which stays the last one applied (status and the log say why); 0 from the start and once a reload is applied.",
		}),
		hotplug: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cpupool_cpu_hotplug_total",
			Help: "CPUs seen going online or offline (event: online, offline).",
		}, []string{"event"}),
		offlineHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cpupool_offline_held_cpus",
			Help: "Exclusive CPUs that are offline while a container or a hold for a stopped container keeps them: the kernel took them from the container's cpuset; they stay its own, and are handed to no one else, while it lives.",
		}),
		unmatched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cpupool_unmatched_annotations_total",
			Help: "Container-scoped annotations (<key>/container.<name>) that named a container the pod never created, counted when the pod's sandbox stopped; the log names the pod, the key and the containers it had.",
		}),
		stateWrites: prometheus.NewDesc("cpupool_state_writes_total", "Successful writes of the state file.", nil, nil),
		stateErrors: prometheus.NewDesc("cpupool_state_write_errors_total", "Failed attempts to write or sync the state file or the kubelet grants file (each is retried; the log names the file).", nil, nil),
		stateAge:    prometheus.NewDesc("cpupool_state_last_write_age_seconds", "Seconds since the last successful write of the state file (since start before the first).", nil, nil),
		stateBehind: prometheus.NewDesc("cpupool_state_behind_seconds", "Seconds the oldest decision not yet in the state file has waited; 0 when the file is current.", nil, nil),
		stateFailing: prometheus.NewDesc("cpupool_state_write_failing",
			"1 while the state writer's last write or fsync of the state or kubelet grants file failed (it retries with backoff; /readyz fails meanwhile), or one under way has not returned for 10 s (a hung disk), 0 otherwise.", nil, nil),
		runtimeConnected: prometheus.NewDesc("cpupool_runtime_connected",
			"1 while the plugin is registered with the runtime, the runtime has synchronized it on that connection and no handler has been under way past the runtime's request timeout (/readyz's runtime check), 0 otherwise.", nil, nil),
		handlerInflight: prometheus.NewDesc("cpupool_handler_oldest_inflight_seconds",
			"Seconds the oldest NRI handler under way has been running, 0 when none is. Past the runtime's request timeout (2 s unless the runtime sets another) the runtime has given up on it: it creates containers without the plugin (unpinned) or refuses them, and /readyz fails.", nil, nil),
		handlers: newHandlerSeconds(),
	}
	// Every reason's refusal series is exported from the start, at 0, so
	// that a reason's first refusal is an increase Prometheus sees (rate
	// and increase cannot see a series that appears at 1), and the refusal
	// alerts need not take a series they have no earlier sample of for a
	// new refusal: after a scrape gap or on a new target, it is an old one
	// (deploy/monitoring).
	for _, r := range []string{allocator.ReasonAnnotation, allocator.ReasonNamespace, allocator.ReasonGrant, allocator.ReasonClaim,
		allocator.ReasonPlacement, allocator.ReasonPower, refusedSynchronize} {
		m.refused.WithLabelValues(r)
	}
	return m
}

// The state label's values of cpupool_numa_memory_bytes and
// cpupool_numa_hugepages.
const (
	memCapacity = "capacity"
	memReserved = "reserved"
	memHeld     = "held"
	memFree     = "free"
	pagesTotal  = "total"
)

// countRefusal counts one refused container, by reason.
func (m *metrics) countRefusal(reason string) { m.refused.WithLabelValues(reason).Inc() }

// The files countDiscarded counts.
const (
	discardedState     = "state"
	discardedGrants    = "kubelet-grants"
	discardedDRAClaims = "dra-claims"
)

// countDiscarded counts a damaged file moved aside.
func (m *metrics) countDiscarded(file string) { m.discarded.WithLabelValues(file).Inc() }

// CountDiscardedClaims counts a DRA claims file the driver could not use
// at start (dra.Options.Discarded): the driver lives in another package,
// the counter with the state's and the grants' here.
func (p *Plugin) CountDiscardedClaims() { p.metrics.countDiscarded(discardedDRAClaims) }

// countForeignMems counts one container seen with mems the plugin did not
// write.
func (m *metrics) countForeignMems(event string) { m.foreignMems.WithLabelValues(event).Inc() }

// countResize counts one in-place resize by its result: grown, shrunk,
// unchanged or refused.
func (m *metrics) countResize(pool, result string) { m.resizes.WithLabelValues(pool, result).Inc() }

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.poolCPUs
	ch <- m.freeCPUs
	ch <- m.members
	ch <- m.runtime
	ch <- m.held
	ch <- m.numaMemory
	ch <- m.numaPages
	m.refused.Describe(ch)
	ch <- m.stateWrites
	ch <- m.stateErrors
	ch <- m.stateAge
	ch <- m.stateBehind
	ch <- m.stateFailing
	ch <- m.runtimeConnected
	ch <- m.handlerInflight
	m.writer.durations.Describe(ch)
	m.synchronized.Describe(ch)
	m.resizes.Describe(ch)
	m.foreignMems.Describe(ch)
	m.discarded.Describe(ch)
	m.partitionsSkipped.Describe(ch)
	m.startRepins.Describe(ch)
	m.handlers.Describe(ch)
	m.reloads.Describe(ch)
	m.reloadSeconds.Describe(ch)
	m.reloadNotApplied.Describe(ch)
	m.hotplug.Describe(ch)
	m.offlineHeld.Describe(ch)
	m.unmatched.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, u := range m.usage.PoolUsage() {
		ch <- prometheus.MustNewConstMetric(m.poolCPUs, prometheus.GaugeValue, float64(u.CPUs), u.Pool)
		ch <- prometheus.MustNewConstMetric(m.members, prometheus.GaugeValue, float64(u.Containers), u.Pool)
		if u.Exclusive() {
			ch <- prometheus.MustNewConstMetric(m.freeCPUs, prometheus.GaugeValue, float64(u.Free), u.Pool)
			ch <- prometheus.MustNewConstMetric(m.held, prometheus.GaugeValue, float64(u.Held), u.Pool)
		}
	}
	for _, n := range m.usage.MemoryReport() {
		node := strconv.Itoa(n.Node)
		if n.Capacity >= 0 {
			ch <- prometheus.MustNewConstMetric(m.numaMemory, prometheus.GaugeValue, float64(n.Capacity), node, memCapacity)
			ch <- prometheus.MustNewConstMetric(m.numaMemory, prometheus.GaugeValue, float64(n.Free), node, memFree)
		}
		ch <- prometheus.MustNewConstMetric(m.numaMemory, prometheus.GaugeValue, float64(n.Reserved), node, memReserved)
		ch <- prometheus.MustNewConstMetric(m.numaMemory, prometheus.GaugeValue, float64(n.Held), node, memHeld)
		for _, p := range n.HugePages {
			size := sysfs.HugePageSizeName(p.SizeKB)
			ch <- prometheus.MustNewConstMetric(m.numaPages, prometheus.GaugeValue, float64(p.Total), node, size, pagesTotal)
			ch <- prometheus.MustNewConstMetric(m.numaPages, prometheus.GaugeValue, float64(p.Reserved), node, size, memReserved)
			ch <- prometheus.MustNewConstMetric(m.numaPages, prometheus.GaugeValue, float64(p.Held), node, size, memHeld)
			ch <- prometheus.MustNewConstMetric(m.numaPages, prometheus.GaugeValue, float64(p.Free), node, size, memFree)
		}
	}
	if rt := m.connected.Load(); rt != nil {
		ch <- prometheus.MustNewConstMetric(m.runtime, prometheus.GaugeValue, 1, rt.name, rt.version, rt.nriVersion)
	}
	m.refused.Collect(ch)
	w := m.writer
	ch <- prometheus.MustNewConstMetric(m.stateWrites, prometheus.CounterValue, float64(w.writes.Load()))
	ch <- prometheus.MustNewConstMetric(m.stateErrors, prometheus.CounterValue, float64(w.errors.Load()))
	ch <- prometheus.MustNewConstMetric(m.stateAge, prometheus.GaugeValue, w.lastWriteAge().Seconds())
	ch <- prometheus.MustNewConstMetric(m.stateBehind, prometheus.GaugeValue, w.behind().Seconds())
	ch <- prometheus.MustNewConstMetric(m.stateFailing, prometheus.GaugeValue, boolGauge(w.ready() != nil))
	ch <- prometheus.MustNewConstMetric(m.runtimeConnected, prometheus.GaugeValue, boolGauge(m.conn.ready() == nil))
	inflight, _ := m.conn.inflight.oldest()
	ch <- prometheus.MustNewConstMetric(m.handlerInflight, prometheus.GaugeValue, inflight.Seconds())
	w.durations.Collect(ch)
	m.synchronized.Collect(ch)
	m.resizes.Collect(ch)
	m.foreignMems.Collect(ch)
	m.discarded.Collect(ch)
	m.partitionsSkipped.Collect(ch)
	m.startRepins.Collect(ch)
	m.handlers.Collect(ch)
	m.reloads.Collect(ch)
	m.reloadSeconds.Collect(ch)
	m.reloadNotApplied.Collect(ch)
	m.hotplug.Collect(ch)
	m.offlineHeld.Collect(ch)
	m.unmatched.Collect(ch)
}

// boolGauge is a gauge's value for a yes or no.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Registry returns a registry with the plugin's metrics, for the caller to
// serve.
func (p *Plugin) Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	p.startAuditing()
	reg.MustRegister(p.metrics, newIsolationMetrics(p), newJournalMetrics(p), newAuditMetrics(p), newPowerMetrics(p), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
