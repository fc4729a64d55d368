package plugin

// The journal of host files' originals that cannot be opened: pinning
// goes on, isolation is degraded (no host file is changed or restored,
// since no original could be recorded), and the open is retried in the
// background until it succeeds (a damaged journal on a
// read-only state directory failed every Configure and Synchronize, and
// nothing was pinned, even on a node with no tuning feature configured).

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// journalOpen follows the journal's opening for readiness and the
// metrics, without the plugin's lock.
type journalOpen struct {
	// failure is the last failed open, nil once one succeeded (or before
	// any failed).
	failure atomic.Pointer[writerFailure]
	// failures counts the failed opens.
	failures atomic.Uint64
	// retry is the pending retry, nil when none is (under the plugin's
	// lock); backoff the wait before the next one.
	retry   *time.Timer
	backoff time.Duration
}

// openIsolationOrDegrade opens the journal and starts the reconciler; if
// the journal cannot be opened, it logs and counts it, and retries later,
// and the plugin pins without isolation meanwhile: it changes no host
// file whose original it cannot record, and restores none, so a journal
// that could not be read or moved aside is never overwritten. Called
// under the lock.
func (p *Plugin) openIsolationOrDegrade() {
	err := p.openIsolation()
	if err == nil {
		if p.journal.failure.Swap(nil) != nil {
			p.log.Infof("isolation: the journal of host files opened; IRQ isolation, partitions, power classes and housekeeping are in force again")
		}
		p.journal.backoff = 0
		return
	}
	p.journal.failures.Add(1)
	noteFailure(&p.journal.failure, "opening the journal of host files", err)
	p.scheduleJournalRetry()
	p.log.Errorf("isolation: opening the journal of host files: %v; containers are pinned, but no host file is changed or restored (IRQ isolation, isolated partitions, power classes, housekeeping) until it opens; retried in %s", err, p.journal.backoff)
}

// scheduleJournalRetry arms the next retry, unless one is pending. Called
// under the lock.
func (p *Plugin) scheduleJournalRetry() {
	if p.journal.retry != nil {
		return
	}
	t := p.isolationTiming
	switch {
	case p.journal.backoff == 0:
		p.journal.backoff = max(t.BackoffInitial, time.Millisecond)
	default:
		p.journal.backoff = min(2*p.journal.backoff, max(t.BackoffMax, p.journal.backoff))
	}
	p.journal.retry = time.AfterFunc(p.journal.backoff, p.retryJournal)
}

// retryJournal opens the journal again, if nothing else has meanwhile (a
// Configure, a Synchronize, a restart of the reconciler) and the plugin
// is not stopping; a Synchronize that came before kicks the first pass.
func (p *Plugin) retryJournal() {
	// The order restartIsolation takes them in: it and closeIsolation
	// own the reconciler's life under isolationRestart.
	p.isolationRestart.Lock()
	defer p.isolationRestart.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.journal.retry = nil
	if p.isolationClosed || p.isolation.Load() != nil || p.isolationClosing || !p.loaded {
		return
	}
	p.openIsolationOrDegrade()
	if iso := p.isolation.Load(); iso != nil && p.synced {
		iso.recon.Kick()
	}
}

// stopJournalRetry stops a pending retry (Close). Called under
// isolationRestart, with isolationClosed set: a retry that already fired
// sees it and opens nothing.
func (p *Plugin) stopJournalRetry() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.journal.retry != nil {
		p.journal.retry.Stop()
		p.journal.retry = nil
	}
}

// IsolationReady is nil unless the journal of host files' originals could
// not be opened at the last attempt: containers are pinned, but no host
// file is changed for IRQ isolation, isolated partitions, power classes
// or housekeeping, and none an earlier run changed is restored, until it
// opens (retried in the background).
func (p *Plugin) IsolationReady() error {
	if f := p.journal.failure.Load(); f != nil {
		return fmt.Errorf("%w; containers are pinned, no host file is changed or restored until it opens (retried)", f)
	}
	return nil
}

// journalMetrics exports the journal's opening.
type journalMetrics struct {
	p                     *Plugin
	unavailable, failures *prometheus.Desc
}

var _ prometheus.Collector = (*journalMetrics)(nil)

func newJournalMetrics(p *Plugin) *journalMetrics {
	return &journalMetrics{p: p,
		unavailable: prometheus.NewDesc("cpupool_host_files_journal_unavailable",
			"1 while the journal of host files' originals (host-originals.json) cannot be opened: containers are pinned, but no host file is changed or restored (IRQ isolation, isolated partitions, power classes, housekeeping) until it opens; /readyz's isolation check. 0 otherwise.", nil, nil),
		failures: prometheus.NewDesc("cpupool_host_files_journal_open_failures_total",
			"Failed attempts to open the journal of host files' originals (an I/O error, or a damaged journal that could not be moved aside); retried with backoff.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *journalMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.unavailable
	ch <- m.failures
}

// Collect implements prometheus.Collector.
func (m *journalMetrics) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(m.unavailable, prometheus.GaugeValue, boolGauge(m.p.journal.failure.Load() != nil))
	ch <- prometheus.MustNewConstMetric(m.failures, prometheus.CounterValue, float64(m.p.journal.failures.Load()))
}
