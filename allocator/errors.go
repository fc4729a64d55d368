package allocator

import (
	"errors"
	"fmt"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// Why a container is refused: the values of the "reason" label of
// cpupool_refused_containers_total. The policy and the allocator mark their
// refusals with them (as the kubelet's SMTAlignmentError carries its Type),
// so that the plugin counts them without knowing which step refused.
const (
	// ReasonAnnotation: a tenant's annotation is malformed, unknown, too
	// large, or asks for what the pod may not have (an AnnotationError),
	// including a pool its namespace may not use.
	ReasonAnnotation = "annotation"
	// ReasonNamespace: the container requests the exclusive pool through
	// the kubelet's resource, and its namespace may not use that pool.
	ReasonNamespace = "namespace"
	// ReasonGrant: the container shows a kubelet grant token that is
	// unknown or belongs to another container.
	ReasonGrant = "grant"
	// ReasonClaim: the container shows a DRA claim token that is unknown,
	// of a claim reserved for other pods, or of a request another container
	// uses.
	ReasonClaim = "claim"
	// ReasonPlacement: the pool cannot give the container what it asks for
	// (it is full, has no CPUs, or the options cannot be met).
	ReasonPlacement = "placement"
	// ReasonPower: the container's power class has a setting this node
	// cannot apply, and power.unsupported is refuse.
	ReasonPower = "power"
)

// Refusal is an error that refuses a container, with its reason.
type Refusal struct {
	Reason string
	Err    error
}

func (r *Refusal) Error() string { return r.Err.Error() }

func (r *Refusal) Unwrap() error { return r.Err }

// ReasonOf is why err refuses a container: the reason of the first Refusal
// it wraps, ReasonAnnotation for an AnnotationError, else ReasonPlacement
// (what the allocator refuses).
func ReasonOf(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	var ae *AnnotationError
	if errors.As(err, &ae) {
		return ReasonAnnotation
	}
	return ReasonPlacement
}

// AnnotationError is a tenant's annotation the policy refuses.
type AnnotationError struct {
	Key, Value, Reason string
}

func (e *AnnotationError) Error() string {
	key := e.Key
	if len(key) > maxEchoedKey {
		key = cpulist.Echo(key)
	}
	return fmt.Sprintf("annotation %s=%s: %s", key, cpulist.Echo(e.Value), e.Reason)
}

// maxEchoedKey is the longest key an error repeats in full.
const maxEchoedKey = 128
