package state

import "time"

// Refusal is the last time the plugin refused to create a container, for
// `nri-cpupool explain`: the runtime shows the message to whoever created
// the container once, and the kubelet's retries show it again only in its
// log.
type Refusal struct {
	PodUID       string    `json:"podUID,omitempty"`
	PodNamespace string    `json:"podNamespace"`
	PodName      string    `json:"podName"`
	Container    string    `json:"container"`
	Time         time.Time `json:"time"`
	// Reason is the refusal's reason, as the refusals metric counts it
	// (annotation, namespace, grant, claim, placement, power).
	Reason string `json:"reason"`
	// Message is what the runtime was told, at most MaxRefusalMessage
	// bytes.
	Message string `json:"message"`
	// Count is how many times in a row the container was refused
	// (the kubelet retries a refused creation with backoff).
	Count int `json:"count"`
}

// Bounds on what the state keeps of refusals: tenants choose how often
// and with what names containers are refused, so the file must not grow
// with them.
const (
	MaxRefusals       = 128
	MaxRefusalMessage = 1024
)
