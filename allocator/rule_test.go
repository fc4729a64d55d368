package allocator

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// TestPolicySaysWhichRuleDecided: the request carries what chose the
// pool (an annotation and its key, the QoS rule, the default pool, a
// claim, the kubelet's devices) and the NUMA nodes of the devices its
// exclusive CPUs prefer, for explain.
func TestPolicySaysWhichRuleDecided(t *testing.T) {
	p := NewPolicy(parseConfig(t, "guaranteedExclusive: true\nallowedNamespaces: {exclusive: [telco]}"), nil)
	resolve := func(path string) (int, error) {
		if path == "/sys/class/net/eth1" {
			return 1, nil
		}
		return -1, errors.New("no such device")
	}
	telco := PodRef{Namespace: "telco", Name: "dpdk", UID: "u"}
	tests := []struct {
		name string
		c    Container
		want Rule
	}{
		{"container annotation", Container{Name: "fwd", Pod: telco, MilliCPU: 1000, Annotations: map[string]string{"pool.cpupool.dev/container.fwd": "exclusive"}},
			Rule{Kind: RuleAnnotation, Detail: "pool.cpupool.dev/container.fwd=exclusive"}},
		{"pod annotation", Container{Name: "log", Pod: telco, Annotations: map[string]string{"pool.cpupool.dev/pod": "shared"}},
			Rule{Kind: RuleAnnotation, Detail: "pool.cpupool.dev/pod=shared"}},
		{"guaranteed whole CPUs", Container{Name: "app", Pod: telco, QoS: QoSGuaranteed, MilliCPU: 2000}, qosRule},
		{"burstable", Container{Name: "app", Pod: telco, QoS: QoSBurstable, MilliCPU: 2000}, defaultRule},
		{"guaranteed, namespace not allowed: the default pool, and why", Container{Name: "app", Pod: PodRef{Namespace: "web"}, QoS: QoSGuaranteed, MilliCPU: 2000},
			Rule{Kind: RuleDefault, Detail: "defaultPool: guaranteedExclusive would give pool exclusive, but allowedNamespaces.exclusive does not list the pod's namespace"}},
		{"DRA claim", Container{Name: "fwd", Pod: telco, KubeletCPUs: cpuset.New(2, 3), Claims: []string{"cpus", "more"}},
			Rule{Kind: RuleClaim, Detail: "ResourceClaims cpus, more"}},
		{"device plugin", Container{Name: "fwd", Pod: telco, KubeletCPUs: cpuset.New(2)},
			Rule{Kind: RuleDevicePlugin, Detail: "resources.limits cpupool.dev/exclusive"}},
		{"device locality", Container{Name: "fwd", Pod: telco, MilliCPU: 1000, DeviceNUMA: cpuset.New(0),
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive", "device.cpupool.dev": "/sys/class/net/eth1"}},
			Rule{Kind: RuleAnnotation, Detail: "pool.cpupool.dev=exclusive", DeviceNUMA: "0-1"}},
		{"devices of a shared container are no locality", Container{Name: "log", Pod: telco, DeviceNUMA: cpuset.New(0),
			Annotations: map[string]string{"pool.cpupool.dev": "shared"}}, Rule{Kind: RuleAnnotation, Detail: "pool.cpupool.dev=shared"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := p.Request(tc.c, resolve)
			require.NoError(t, err)
			assert.Equal(t, tc.want, req.Rule)
		})
	}
}

// TestAssignmentSaysWhoseHeldCPUsItTook: a container's next run, and an
// app container taking a completed init container's CPUs, say whose held
// CPUs they took; the rule of the request is the assignment's.
func TestAssignmentSaysWhoseHeldCPUsItTook(t *testing.T) {
	a := newAllocator(t, "vm-2cpu", `isolatedCPUs: "1"`)
	init := exclusive("init", 1)
	init.Container, init.Rule = "init", Rule{Kind: RuleAnnotation, Detail: "pool.cpupool.dev=exclusive"}
	res, err := a.Allocate(init)
	require.NoError(t, err)
	assert.Equal(t, init.Rule, res.Assignment.Rule, "nothing held: taken from no hold")
	a.Stop("init", exitCode(0))
	app := inPod(init, "app", "app", 1)
	res, err = a.Allocate(app)
	require.NoError(t, err)
	assert.Equal(t, "init", res.Assignment.Rule.FromHold)
	assert.Equal(t, RuleAnnotation, res.Assignment.Rule.Kind)

	a.Stop("app", exitCode(137))
	again, err := a.Allocate(inPod(init, "app-2", "app", 1))
	require.NoError(t, err)
	assert.Equal(t, "app", again.Assignment.Rule.FromHold, "its own previous run")
	got, _ := a.Get("app-2")
	assert.Equal(t, "app", got.Rule.FromHold)
}
