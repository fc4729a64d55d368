package plugin

// Power classes: the plugin's side of package power. A decision only
// changes the allocator (each exclusive container's class rides on its
// assignment) and kicks the host files' reconciler; its background pass
// asks for every CPU's class (powerWants) and writes.

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/power"
)

// configurePower reads what the node offers for the config's classes,
// once: under power.unsupported: refuse, it tells the policy which classes
// to refuse (what is missing, a VM without cpufreq, nodecheck.Check warned
// about). Called at start and when the runtime passes a config, never on a
// container's reply path.
func (p *Plugin) configurePower(cfg *config.Config) {
	if len(cfg.Power.Classes) == 0 {
		return
	}
	p.policy.SetPowerRefusals(power.NewNode(cfg.SysfsRoot, p.topo).Refusals(cfg))
}

// powerSource is the Source of power classes for the reconciler: when a
// pool has a class, or the journal holds files an earlier run changed
// (they are restored once nothing wants them). Nil otherwise.
func (p *Plugin) powerSource(j *hostfiles.Journal) *power.Source {
	if !p.cfg.PowerEnabled() && !hasOwner(j, power.Owner) {
		return nil
	}
	node := power.NewNode(p.cfg.SysfsRoot, p.topo)
	src := power.NewSource(node, p.cfg.Power.Classes, p.powerWants, j, p.log)
	src.Warned(node.Unsupported(p.cfg)) // configurePower said them
	return src
}

// powerWants is every CPU's class, for the reconciler's pass.
func (p *Plugin) powerWants() map[int]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cfg.PowerEnabled() {
		return nil
	}
	return p.alloc.PowerClasses(allocator.PoolPowerClassesOf(p.cfg))
}

// powerState is each class's CPUs, for the state file (status). Called
// under the lock by the writer's collection.
func (p *Plugin) powerState() map[string]string {
	if !p.cfg.PowerEnabled() {
		return nil
	}
	byClass := map[string][]int{}
	for cpu, class := range p.alloc.PowerClasses(allocator.PoolPowerClassesOf(p.cfg)) {
		byClass[class] = append(byClass[class], cpu)
	}
	out := make(map[string]string, len(byClass))
	for class, cpus := range byClass {
		out[class] = cpuset.New(cpus...).String()
	}
	return out
}

// powerMetrics exports what the last pass did with the classes; read from
// the Source's report and the reconciler's status, never waiting for a
// pass.
type powerMetrics struct {
	p              *Plugin
	cpus, settings *prometheus.Desc
}

var _ prometheus.Collector = (*powerMetrics)(nil)

// Results of a power setting, the values of cpupool_power_settings'
// result label.
const (
	settingApplied     = "applied"
	settingRefused     = "refused"
	settingUnsupported = "unsupported"
)

func newPowerMetrics(p *Plugin) *powerMetrics {
	return &powerMetrics{p: p,
		cpus: prometheus.NewDesc("cpupool_power_cpus", "CPUs of each power class, as of the last pass over the host files.", []string{"class"}, nil),
		settings: prometheus.NewDesc("cpupool_power_settings",
			"Settings of each power class (one file of one CPU, cpufreq policy or uncore die) as of the last pass: applied (written or already so), refused (the kernel refused it; not retried while wanted), unsupported (this node lacks it: one per CPU).",
			[]string{"class", "result"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *powerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.cpus
	ch <- m.settings
}

// Collect implements prometheus.Collector.
func (m *powerMetrics) Collect(ch chan<- prometheus.Metric) {
	iso := m.p.isolation.Load()
	if iso == nil || iso.power == nil {
		return
	}
	rep := iso.power.Report()
	refused := map[string]bool{}
	for _, f := range iso.recon.Status().Failures {
		if f.Owner == power.Owner && !f.Restore {
			refused[f.Path] = true
		}
	}
	counts := map[string]map[string]int{}
	count := func(class, result string, n int) {
		if counts[class] == nil {
			counts[class] = map[string]int{settingApplied: 0, settingRefused: 0, settingUnsupported: 0}
		}
		counts[class][result] += n
	}
	for class := range rep.CPUs {
		count(class, settingApplied, 0)
	}
	for path, class := range rep.Files {
		if refused[path] {
			count(class, settingRefused, 1)
		} else {
			count(class, settingApplied, 1)
		}
	}
	for _, n := range rep.Unsupported {
		count(n.Class, settingUnsupported, n.CPUs.Size())
	}
	for _, class := range slices.Sorted(maps.Keys(counts)) {
		ch <- prometheus.MustNewConstMetric(m.cpus, prometheus.GaugeValue, float64(rep.CPUs[class].Size()), class)
		for result, n := range counts[class] {
			ch <- prometheus.MustNewConstMetric(m.settings, prometheus.GaugeValue, float64(n), class, result)
		}
	}
}
