package plugin

// Power classes: the plugin's side of package power. A decision only
// changes the allocator (each exclusive container's class rides on its
// assignment) and kicks the host files' reconciler; its background pass
// asks for every CPU's class (powerWants) and writes.

import (
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

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
// under the lock by the writer's collection, at every write: it lists each
// class's CPUs by walking them in order, rather than building a set per
// class and sorting it (a set of every CPU per write, under the lock every
// reply takes; issue 45).
func (p *Plugin) powerState() map[string]string {
	if !p.cfg.PowerEnabled() {
		return nil
	}
	return classCPULists(p.alloc.PowerClasses(allocator.PoolPowerClassesOf(p.cfg)))
}

// classCPULists is each class's CPUs, as a CPU list, of a class by CPU.
func classCPULists(classes map[int]string) map[string]string {
	last := -1
	for cpu := range classes {
		last = max(last, cpu)
	}
	byCPU := make([]string, last+1) // "" for a CPU without a class
	for cpu, class := range classes {
		byCPU[cpu] = class
	}
	var lists []classList
	for cpu, class := range byCPU {
		if class == "" {
			continue
		}
		i := slices.IndexFunc(lists, func(l classList) bool { return l.class == class })
		if i < 0 {
			lists = append(lists, classList{class: class})
			i = len(lists) - 1
		}
		lists[i].add(cpu)
	}
	out := make(map[string]string, len(lists))
	for _, l := range lists {
		out[l.class] = l.String()
	}
	return out
}

// classList writes a class's CPUs, given in ascending order, as a CPU list
// in cpuset.CPUSet.String's form ("0-3,8,10-11").
type classList struct {
	class       string
	buf         []byte
	first, prev int
	open        bool // a span from first to prev is not written yet
}

func (l *classList) add(cpu int) {
	if l.open && cpu == l.prev+1 {
		l.prev = cpu
		return
	}
	l.flush()
	l.first, l.prev, l.open = cpu, cpu, true
}

func (l *classList) flush() {
	if !l.open {
		return
	}
	if len(l.buf) > 0 {
		l.buf = append(l.buf, ',')
	}
	l.buf = strconv.AppendInt(l.buf, int64(l.first), 10)
	if l.prev > l.first {
		l.buf = append(l.buf, '-')
		l.buf = strconv.AppendInt(l.buf, int64(l.prev), 10)
	}
	l.open = false
}

func (l *classList) String() string {
	l.flush()
	return string(l.buf)
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
