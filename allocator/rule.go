package allocator

// Rule says what decided a container's pool and where its CPUs went, for
// `nri-cpupool explain`: the policy fills it while deciding, from what it
// looked up anyway, so recording it costs the reply path a string or two.
// Its fields are strings so that an assignment's record stays comparable
// (the state encoder re-encodes only records that changed).
type Rule struct {
	// Kind is what chose the pool: one of the Rule* values.
	Kind string
	// Detail is the annotation, claim or setting that did, as text.
	Detail string
	// DeviceNUMA are the NUMA nodes of the container's devices, which its
	// exclusive CPUs prefer (device locality); "" when none.
	DeviceNUMA string
	// FromHold names the stopped container of its pod whose held CPUs it
	// took (its own previous run, or a completed init container); "" when
	// it took none.
	FromHold string
	// OtherContainerKeys are the pod's container-scoped keys of our
	// domain ("pool.cpupool.dev/container.<name>") that name other
	// containers, comma-separated and sorted, when the container has none
	// of its own; "" otherwise. explain tells which of them name no
	// container of the pod: a typo of this container's name left it to
	// the other rules. The plugin fills it from what it computes before
	// the lock for the creation's typo warning (plugin/unmatched.go).
	OtherContainerKeys string
}

// The kinds of Rule.
const (
	// RuleAnnotation: the pool.cpupool.dev annotation.
	RuleAnnotation = "annotation"
	// RuleQoS: guaranteedExclusive, for a Guaranteed pod with whole CPUs.
	RuleQoS = "qos"
	// RuleDefault: the config's defaultPool, nothing asked for another.
	RuleDefault = "default"
	// RuleClaim: the container's DRA ResourceClaims.
	RuleClaim = "dra-claim"
	// RuleDevicePlugin: the kubelet's cpupool.dev/exclusive devices.
	RuleDevicePlugin = "device-plugin"
	// RuleConfined: the plugin could not place a container it found
	// running when it synchronized with the runtime, and confined it to
	// infra; Detail says why.
	RuleConfined = "confined"
)

// The rules of a container no pool annotation placed; constant, so the
// reply path builds no string for them.
var (
	qosRule     = Rule{Kind: RuleQoS, Detail: "guaranteedExclusive: a Guaranteed pod requesting whole CPUs"}
	defaultRule = Rule{Kind: RuleDefault, Detail: "defaultPool"}
)
