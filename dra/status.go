package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// State is where the driver is in serving the kubelet. Whatever it is,
// the NRI side pins containers: a driver that cannot serve the kubelet
// yet only means that no claim is prepared on the node meanwhile.
type State string

// The driver's states, in the order it goes through them.
const (
	// StateStarting: the driver is set up and has not looked for the
	// kubelet yet.
	StateStarting State = "starting"
	// StateWaitingForCredentials: the API client cannot be made yet (a
	// dra.kubeconfig that does not exist or cannot be read, as before a
	// node joins its cluster; no in-cluster credentials). The driver
	// tries again with backoff.
	StateWaitingForCredentials State = "waiting-for-credentials"
	// StateWaitingForKubelet: the kubelet's plugin registration directory
	// does not exist (the kubelet has not started yet on this node, or
	// dra.registryDir names another directory than the kubelet's). The
	// driver looks again with backoff.
	StateWaitingForKubelet State = "waiting-for-kubelet"
	// StateRetrying: starting the kubelet plugin failed otherwise; the
	// driver tries again with backoff.
	StateRetrying State = "retrying"
	// StateServing: the driver's sockets are up; the kubelet has not
	// confirmed its registration yet.
	StateServing State = "serving"
	// StateRegistered: the kubelet confirmed the registration.
	StateRegistered State = "registered"
	// StateStopped: the daemon is stopping.
	StateStopped State = "stopped"
)

// States lists the states, for the metric's label values.
func States() []State {
	return []State{StateStarting, StateWaitingForCredentials, StateWaitingForKubelet, StateRetrying, StateServing, StateRegistered, StateStopped}
}

// Status is the driver's state, since when, and what it waits for or
// what failed.
type Status struct {
	State  State     `json:"state"`
	Since  time.Time `json:"since"`
	Detail string    `json:"detail,omitempty"`
}

// StatusFile is the driver's status file for a state file: next to it, for
// `nri-cpupool status`.
func StatusFile(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), "dra-status.json")
}

// ReadStatus reads a status file; ok is false when there is none (the
// driver is off).
func ReadStatus(path string) (s Status, ok bool, err error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Status{}, false, nil
	case err != nil:
		return Status{}, false, fmt.Errorf("reading the DRA driver's status: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return Status{}, false, fmt.Errorf("DRA driver status %s: %w", path, err)
	}
	return s, true, nil
}

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
// the state the driver is in and 0 for the others.
func (d *Driver) Collector() prometheus.Collector { return stateCollector{d} }

const stateHelp = "The DRA driver's state (starting, waiting-for-kubelet, retrying, serving, registered, stopped): 1 for the current one. Pinning does not depend on it."

var stateDesc = prometheus.NewDesc("cpupool_dra_driver_state", stateHelp, []string{"state"}, nil)

type stateCollector struct{ d *Driver }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stateDesc }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.d.Status().State
	for _, s := range States() {
		v := 0.0
		if s == now {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, string(s))
	}
}
