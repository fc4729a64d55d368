package allocator

// A Guaranteed container of whole CPUs that guaranteedExclusive would have
// made exclusive, in a namespace the pool's allowedNamespaces leaves out,
// goes to the default pool; the pod is told why, in one text wherever it
// is told: explain's "Decided by" (the recorded rule), the CPUPoolNotAllowed
// Event and simulate's step.

import (
	"fmt"

	"github.com/cpupool/nri-cpupool/pools"
)

// The reasons a container guaranteedExclusive would have put in an
// exclusive pool went to the default pool instead, one per pool: constants,
// so the reply path builds no string for them.
const (
	notAllowedExclusive = "guaranteedExclusive would give pool " + pools.Exclusive +
		", but allowedNamespaces." + pools.Exclusive + " does not list the pod's namespace"
	notAllowedNonIsolcpus = "guaranteedExclusive would give pool " + pools.ExclusiveNonIsolcpus +
		", but allowedNamespaces." + pools.ExclusiveNonIsolcpus + " does not list the pod's namespace"
)

// NotAllowedReason says why a container guaranteedExclusive would have put
// in pool went to the default pool: the one text of it, in the rule that
// explain shows, the pod's CPUPoolNotAllowed Event and simulate's step
// (Request.NotAllowedMessage).
func NotAllowedReason(pool string) string {
	if pool == pools.ExclusiveNonIsolcpus {
		return notAllowedNonIsolcpus
	}
	return notAllowedExclusive
}

// notAllowedRule is the rule of a container guaranteedExclusive would
// have put in pool, had allowedNamespaces.<pool> listed its namespace: the
// default pool, and why.
func notAllowedRule(pool string) Rule {
	if pool == pools.ExclusiveNonIsolcpus {
		return Rule{Kind: RuleDefault, Detail: "defaultPool: " + notAllowedNonIsolcpus}
	}
	return Rule{Kind: RuleDefault, Detail: "defaultPool: " + notAllowedExclusive}
}

// NotAllowedMessage is what the pod is told of a request that went to the
// default pool because allowedNamespaces left its namespace out of the
// pool guaranteedExclusive would have given it: the CPUPoolNotAllowed
// Event's words after the container's name, and simulate's warning. ""
// for every other request.
func (r Request) NotAllowedMessage() string {
	if r.NotAllowed == "" {
		return ""
	}
	return fmt.Sprintf("in pool %s, not %s: %s %q", r.Pool, r.NotAllowed, NotAllowedReason(r.NotAllowed), r.Pod.Namespace)
}
