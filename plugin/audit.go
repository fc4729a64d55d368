package plugin

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cpupool/nri-cpupool/audit"
	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/pools"
)

// auditor runs the isolation audit (package audit, as `nri-cpupool audit`
// does) in the background every interval and keeps the last report for
// the metrics: a scrape never waits for a sample.
type auditor struct {
	last atomic.Pointer[audit.Report]
	quit chan struct{}
	done chan struct{}
}

// Audit timing: a one-second sample of /proc/interrupts each minute.
const (
	auditInterval = time.Minute
	auditSample   = time.Second
)

// startAuditing begins the periodic audit, once, when metrics are served
// (Registry was asked for); the first report comes a sample after the
// first Synchronize.
func (p *Plugin) startAuditing() {
	a := &auditor{quit: make(chan struct{}), done: make(chan struct{})}
	if !p.auditor.CompareAndSwap(nil, a) {
		return
	}
	go a.run(p)
}

func (a *auditor) run(p *Plugin) {
	proflabel.Worker(proflabel.Audit).Apply()
	defer close(a.done)
	tick := time.NewTicker(auditInterval)
	defer tick.Stop()
	for {
		if p.syncedOnce() {
			if rep, err := p.auditNow(auditSample); err == nil {
				a.last.Store(rep)
			} else {
				p.log.Debugf("audit: %v", err)
			}
		}
		select {
		case <-a.quit:
			return
		case <-tick.C:
		}
	}
}

func (p *Plugin) stopAuditing() {
	if a := p.auditor.Load(); a != nil {
		close(a.quit)
		<-a.done
	}
}

func (p *Plugin) syncedOnce() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}

// auditNow audits the held exclusive CPUs; the holdings are taken under
// the lock, the sample and the reads happen outside it.
func (p *Plugin) auditNow(sample time.Duration) (*audit.Report, error) {
	p.mu.Lock()
	var holdings []audit.Holding
	for _, a := range p.alloc.Assignments() {
		if pools.IsExclusive(a.Pool) {
			holdings = append(holdings, audit.Holding{CPUs: a.Held(), Owner: a.Pod.ContainerName(a.Container), Pool: a.Pool, ContainerID: a.ID, PowerClass: a.PowerClass})
		}
	}
	for _, h := range p.alloc.Holds() {
		holdings = append(holdings, audit.Holding{CPUs: h.Held(), Owner: h.Pod.ContainerName(h.Container) + " (stopped, held)", Pool: h.Pool, PowerClass: h.PowerClass})
	}
	cfg := p.cfg
	p.mu.Unlock()
	var refused map[string]string
	if iso := p.isolation.Load(); iso != nil {
		refused = map[string]string{}
		for _, f := range iso.recon.Status().Failures {
			refused[f.Path] = f.Error
		}
	}
	cgroupRoot := ""
	if _, err := os.Stat(filepath.Join(cfg.CgroupRoot, "cgroup.controllers")); err == nil {
		cgroupRoot = cfg.CgroupRoot
	}
	return audit.Gather(holdings, audit.Options{ProcRoot: cfg.ProcRoot, SysfsRoot: cfg.SysfsRoot, CgroupRoot: cgroupRoot, Sample: sample, Refused: refused,
		RPSKept: cfg.RPSHeld(), WorkqueuesKept: cfg.WorkqueuesHeld()})
}

// auditMetrics exports the last report.
type auditMetrics struct {
	p                              *Plugin
	clean, irqs, threads, lastTime *prometheus.Desc
}

var _ prometheus.Collector = (*auditMetrics)(nil)

func newAuditMetrics(p *Plugin) *auditMetrics {
	labels := []string{"cpu", "pool"}
	return &auditMetrics{p: p,
		clean:    prometheus.NewDesc("cpupool_exclusive_cpu_clean", "1 when the held exclusive CPU was clean at the last audit (no device IRQ fired on it, no user-space thread of another process may run on it), else 0.", labels, nil),
		irqs:     prometheus.NewDesc("cpupool_exclusive_cpu_device_irqs", "Device IRQs that fired on the held exclusive CPU during the last audit's one-second sample.", labels, nil),
		threads:  prometheus.NewDesc("cpupool_exclusive_cpu_foreign_threads", "User-space threads of other processes allowed on the held exclusive CPU at the last audit.", labels, nil),
		lastTime: prometheus.NewDesc("cpupool_audit_timestamp_seconds", "When the last audit of the held exclusive CPUs ran (Unix time); audits run every minute while metrics are served.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *auditMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.clean, m.irqs, m.threads, m.lastTime} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *auditMetrics) Collect(ch chan<- prometheus.Metric) {
	a := m.p.auditor.Load()
	if a == nil {
		return
	}
	rep := a.last.Load()
	if rep == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(m.lastTime, prometheus.GaugeValue, float64(rep.At.Unix()))
	for _, c := range rep.CPUs {
		cpu := strconv.Itoa(c.CPU)
		clean := 0.0
		if c.Clean {
			clean = 1
		}
		var fired uint64
		for _, i := range c.IRQs {
			if i.Device {
				fired += i.Count
			}
		}
		ch <- prometheus.MustNewConstMetric(m.clean, prometheus.GaugeValue, clean, cpu, c.Pool)
		ch <- prometheus.MustNewConstMetric(m.irqs, prometheus.GaugeValue, float64(fired), cpu, c.Pool)
		ch <- prometheus.MustNewConstMetric(m.threads, prometheus.GaugeValue, float64(c.ForeignThreads), cpu, c.Pool)
	}
}
