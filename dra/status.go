package dra

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// Status returns the driver's state.
func (d *Driver) Status() Status {
	d.statusMu.Lock()
	defer d.statusMu.Unlock()
	return d.status
}

// setState moves the driver to a state and, if it changed, logs it (a
// warning for the states that wait or retry) and writes the status file.
// The same state with a new detail (another error while retrying) is
// logged at debug level: a retry every few seconds would flood the log.
func (d *Driver) setState(s State, detail string) {
	d.statusMu.Lock()
	defer d.statusMu.Unlock()
	if d.status.State == s && d.status.Detail == detail {
		return
	}
	since := time.Now().UTC()
	if d.status.State == s {
		since = d.status.Since
		d.log.Debugf("DRA driver %s: %s", s, detail)
	} else {
		line := "DRA driver " + string(s)
		if detail != "" {
			line += ": " + detail
		}
		switch s {
		case StateWaitingForCredentials, StateWaitingForKubelet, StateRetrying:
			d.log.Warn(line)
		default:
			d.log.Info(line)
		}
	}
	d.status = Status{State: s, Since: since, Detail: detail}
	if d.statusFile == "" {
		return
	}
	data, err := json.Marshal(d.status)
	if err == nil {
		err = atomicfile.Replace(d.statusFile, append(data, '\n'), false)
	}
	if err != nil {
		d.log.Warnf("DRA: writing the driver's status for nri-cpupool status: %v", err)
	}
}

// Collector returns the driver's metrics: cpupool_dra_driver_state, 1 for
// the state the driver is in and 0 for the others,
// cpupool_dra_claims_write_errors_total and
// cpupool_dra_cdi_write_errors_total.
func (d *Driver) Collector() prometheus.Collector { return stateCollector{d} }

// stateHelp names every state from States(), which the collector
// reports (review 58, item 14: it lacked waiting-for-credentials).
var stateHelp = func() string {
	var names []string
	for _, s := range States() {
		names = append(names, string(s))
	}
	return "The DRA driver's state (" + strings.Join(names, ", ") + "): 1 for the current one. Pinning does not depend on it."
}()

var stateDesc = prometheus.NewDesc("cpupool_dra_driver_state", stateHelp, []string{"state"}, nil)

// writeErrorsHelp is the help of cpupool_dra_claims_write_errors_total.
const writeErrorsHelp = "Failed writes of the DRA claims file: a Prepare's fails it (the kubelet retries), an Unprepare's or a container binding's is retried in the background. Logged, a flood of Prepares coalesced."

var writeErrorsDesc = prometheus.NewDesc("cpupool_dra_claims_write_errors_total", writeErrorsHelp, nil, nil)

// cdiWriteErrorsHelp is the help of cpupool_dra_cdi_write_errors_total: a
// counter of its own, not a label on the claims file's, whose series
// dashboards and alerts select without one.
const cdiWriteErrorsHelp = "CDI specs a DRA Prepare could not write (in dra.cdiDir): the Prepare fails, the claim keeps its CPUs and the kubelet retries. Logged, a flood of Prepares coalesced."

var cdiWriteErrorsDesc = prometheus.NewDesc("cpupool_dra_cdi_write_errors_total", cdiWriteErrorsHelp, nil, nil)

type stateCollector struct{ d *Driver }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDesc
	ch <- writeErrorsDesc
	ch <- cdiWriteErrorsDesc
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.d.Status().State
	for _, s := range States() {
		v := 0.0
		if s == now {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, string(s))
	}
	ch <- prometheus.MustNewConstMetric(writeErrorsDesc, prometheus.CounterValue, float64(c.d.store.failures.Load()))
	ch <- prometheus.MustNewConstMetric(cdiWriteErrorsDesc, prometheus.CounterValue, float64(c.d.cdiWriteErrors.Load()))
}
