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
// the metrics: a scrape never waits for a sample. A failing audit keeps
// the last good report (its timestamp ages) and says so: a warning at the
// first failure, an info line when it works again, and
// cpupool_audit_failing for the alert.
type auditor struct {
	last atomic.Pointer[audit.Report]
	// attempted: an audit ran (after the first Synchronize); failing: the
	// last one failed. Read by the metrics without the lock.
	attempted, failing atomic.Bool
	// kick asks for an audit now: the first Synchronize sends it, so that
	// the first report does not wait for the next tick.
	kick chan struct{}
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
// first Synchronize (auditSynchronized), or after this call when that was
// earlier.
func (p *Plugin) startAuditing() {
	a := &auditor{kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if !p.auditor.CompareAndSwap(nil, a) {
		return
	}
	go a.run(p)
}

// auditSynchronized asks the auditor, if metrics are served, for an audit
// now: Synchronize changed what is held. Under the lock; it never waits.
func (p *Plugin) auditSynchronized() {
	if a := p.auditor.Load(); a != nil {
		select {
		case a.kick <- struct{}{}:
		default: // one is asked for already
		}
	}
}

func (a *auditor) run(p *Plugin) {
	proflabel.Worker(proflabel.Audit).Apply()
	defer close(a.done)
	tick := time.NewTicker(auditInterval)
	defer tick.Stop()
	for {
		if p.syncedOnce() {
			a.once(p)
		}
		select {
		case <-a.quit:
			return
		case <-tick.C:
		case <-a.kick:
		}
	}
}

// once audits and keeps the report, or says the audit fails: a warning
// at the first failure, then debug lines, each minute's the same, and an
// info line when it works again.
func (a *auditor) once(p *Plugin) {
	rep, err := p.auditNow(auditSample)
	a.attempted.Store(true)
	switch {
	case err != nil && !a.failing.Swap(true):
		p.log.Warnf("audit: %v; the audit metrics of the held exclusive CPUs are not updated until it works again (cpupool_audit_failing is 1)", err)
	case err != nil:
		p.log.Debugf("audit: %v", err)
	case a.failing.Swap(false):
		p.log.Infof("audit: works again")
	}
	if err == nil {
		a.last.Store(rep)
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

// auditMetrics exports the last report. A verdict or count the audit
// could not know is absent, never 0 or 1: where the proc root does not
// show the host's processes (a pod without hostPID), the foreign threads
// are unknown, and so is whether a CPU with no other finding is clean.
type auditMetrics struct {
	p                                    *Plugin
	clean, irqs, threads, lastTime, sees *prometheus.Desc
	failing, offline                     *prometheus.Desc
}

// offlineHelp is cpupool_exclusive_cpu_offline's help. The series lets
// CpupoolExclusiveCPUNotClean leave out an offline CPU: it is not clean
// for no IRQ or thread, and CpupoolOfflineHeldCPUs says what it is.
const offlineHelp = "1 when the held exclusive CPU was offline at the last audit (CPU hotplug, hot-removed included: cpupool_exclusive_cpu_clean is then 0 for that reason), else 0."

var _ prometheus.Collector = (*auditMetrics)(nil)

func newAuditMetrics(p *Plugin) *auditMetrics {
	labels := []string{"cpu", "pool"}
	return &auditMetrics{p: p,
		clean: prometheus.NewDesc("cpupool_exclusive_cpu_clean", "1 when the held exclusive CPU was clean at the last audit (no device IRQ fired on it, no user-space thread of another process may run on it), else 0; "+
			"absent when unknown: nothing else was found and the audit cannot see the host's processes (cpupool_audit_sees_host_threads 0).", labels, nil),
		irqs:     prometheus.NewDesc("cpupool_exclusive_cpu_device_irqs", "Device IRQs that fired on the held exclusive CPU during the last audit's one-second sample.", labels, nil),
		threads:  prometheus.NewDesc("cpupool_exclusive_cpu_foreign_threads", "User-space threads of other processes allowed on the held exclusive CPU at the last audit; absent when the audit cannot see the host's processes.", labels, nil),
		lastTime: prometheus.NewDesc("cpupool_audit_timestamp_seconds", "When the last audit of the held exclusive CPUs ran (Unix time); audits run every minute while metrics are served.", nil, nil),
		sees: prometheus.NewDesc("cpupool_audit_sees_host_threads", "1 when the last audit saw the host's processes (procRoot shows the host's PID namespace), "+
			"0 when it did not (a pod without hostPID): the threads that may run on held CPUs are then unknown.", nil, nil),
		offline: prometheus.NewDesc("cpupool_exclusive_cpu_offline", offlineHelp, labels, nil),
		failing: prometheus.NewDesc("cpupool_audit_failing", "1 when the last background audit of the held exclusive CPUs failed (the daemon's log has the error; the other audit metrics are then the last good audit's), 0 when it worked; "+
			"absent until the first audit, which comes after the first Synchronize.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *auditMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.clean, m.irqs, m.threads, m.lastTime, m.sees, m.failing, m.offline} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *auditMetrics) Collect(ch chan<- prometheus.Metric) {
	a := m.p.auditor.Load()
	if a == nil {
		return
	}
	if a.attempted.Load() {
		failing := 0.0
		if a.failing.Load() {
			failing = 1
		}
		ch <- prometheus.MustNewConstMetric(m.failing, prometheus.GaugeValue, failing)
	}
	rep := a.last.Load()
	if rep == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(m.lastTime, prometheus.GaugeValue, float64(rep.At.Unix()))
	sees := 0.0
	if rep.SeesHostThreads {
		sees = 1
	}
	ch <- prometheus.MustNewConstMetric(m.sees, prometheus.GaugeValue, sees)
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
		if !c.Unknown {
			ch <- prometheus.MustNewConstMetric(m.clean, prometheus.GaugeValue, clean, cpu, c.Pool)
		}
		ch <- prometheus.MustNewConstMetric(m.irqs, prometheus.GaugeValue, float64(fired), cpu, c.Pool)
		offline := 0.0
		if c.Offline {
			offline = 1
		}
		ch <- prometheus.MustNewConstMetric(m.offline, prometheus.GaugeValue, offline, cpu, c.Pool)
		if rep.SeesHostThreads {
			ch <- prometheus.MustNewConstMetric(m.threads, prometheus.GaugeValue, float64(c.ForeignThreads), cpu, c.Pool)
		}
	}
}
