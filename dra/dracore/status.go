package dracore

import (
	"fmt"
	"path/filepath"
	"time"

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
	if ok, err = atomicfile.ReadJSON(path, &s); err != nil {
		return Status{}, false, fmt.Errorf("reading the DRA driver's status: %w", err)
	}
	return s, ok, nil
}
