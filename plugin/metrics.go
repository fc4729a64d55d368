package plugin

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cpupool/nri-cpupool/config"
)

// Metrics are read from the allocator at scrape time, under the plugin's
// lock, so they can never disagree with the decisions; only the refusal
// counter is kept separately.
type metrics struct {
	p        *Plugin
	poolCPUs *prometheus.Desc
	freeCPUs *prometheus.Desc
	members  *prometheus.Desc
	refused  *prometheus.CounterVec
	// synchronized counts Synchronize calls: 1 after the first registration,
	// one more after each reconnect (a runtime restart).
	synchronized prometheus.Counter
	runtime      *prometheus.Desc
}

func newMetrics(p *Plugin) *metrics {
	return &metrics{
		p:        p,
		poolCPUs: prometheus.NewDesc("cpupool_pool_cpus", "CPUs in the pool now (infra shrinks while exclusive-non-isolcpus containers run).", []string{"pool"}, nil),
		freeCPUs: prometheus.NewDesc("cpupool_pool_free_cpus", "CPUs of an exclusive pool that no container holds.", []string{"pool"}, nil),
		members:  prometheus.NewDesc("cpupool_containers", "Containers assigned to the pool.", []string{"pool"}, nil),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cpupool_refused_containers_total",
			Help: "Container creations refused, by reason (annotation, placement, state).",
		}, []string{"reason"}),
		synchronized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cpupool_runtime_synchronizations_total",
			Help: "Times the runtime synchronized the plugin: at registration and after every reconnect.",
		}),
		runtime: prometheus.NewDesc("cpupool_runtime_info",
			"The connected runtime, the NRI version it embeds, and whether the plugin sends updates on its own (NRI >= "+minNRIForPluginUpdates+") or only in replies.",
			[]string{"runtime", "version", "nri_version", "plugin_updates"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.poolCPUs
	ch <- m.freeCPUs
	ch <- m.members
	ch <- m.runtime
	m.refused.Describe(ch)
	m.synchronized.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.p.mu.Lock()
	counts := map[string]int{}
	for _, a := range m.p.alloc.Assignments() {
		counts[a.Pool]++
	}
	for _, pool := range config.PoolNames {
		ch <- prometheus.MustNewConstMetric(m.poolCPUs, prometheus.GaugeValue, float64(m.p.alloc.PoolCPUs(pool).Size()), pool)
		ch <- prometheus.MustNewConstMetric(m.members, prometheus.GaugeValue, float64(counts[pool]), pool)
		if config.IsExclusivePool(pool) {
			free := m.p.alloc.FreeCPUs(pool)
			if pool == config.PoolExclusiveNonIsolcpus {
				// Lendable CPUs also have to be in infra's spare room.
				free = free.Intersection(m.p.alloc.PoolCPUs(config.PoolInfra))
			}
			ch <- prometheus.MustNewConstMetric(m.freeCPUs, prometheus.GaugeValue, float64(free.Size()), pool)
		}
	}
	if rt := m.p.runtime; rt.name != "" {
		mode := "replies-only"
		if rt.pluginUpdatesSafe() {
			mode = "unsolicited"
		}
		ch <- prometheus.MustNewConstMetric(m.runtime, prometheus.GaugeValue, 1, rt.name, rt.version, rt.nriVersion, mode)
	}
	m.p.mu.Unlock()
	m.refused.Collect(ch)
	m.synchronized.Collect(ch)
}

// Registry returns a registry with the plugin's metrics, for the caller to
// serve.
func (p *Plugin) Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
