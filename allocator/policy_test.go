package allocator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

func TestPolicyChoosesPool(t *testing.T) {
	cfg := parseConfig(t, "guaranteedExclusive: true\nallowedNamespaces: {exclusive: [telco, trading], shared: [\"*\"]}")
	p := NewPolicy(cfg, nil)
	tests := []struct {
		name string
		c    Container
		pool string
	}{
		{"no annotation: default pool", Container{Name: "app", Pod: PodRef{Namespace: "web"}, QoS: QoSBurstable, MilliCPU: 2000}, pools.Infra},
		{"guaranteed whole CPUs: exclusive", Container{Name: "app", Pod: PodRef{Namespace: "telco"}, QoS: QoSGuaranteed, MilliCPU: 2000}, pools.Exclusive},
		{"guaranteed fractional: default", Container{Name: "app", Pod: PodRef{Namespace: "telco"}, QoS: QoSGuaranteed, MilliCPU: 1500}, pools.Infra},
		{"guaranteed, namespace not allowed: default", Container{Name: "app", Pod: PodRef{Namespace: "web"}, QoS: QoSGuaranteed, MilliCPU: 2000}, pools.Infra},
		{"container annotation wins over pod", Container{Name: "fwd", Pod: PodRef{Namespace: "telco"}, MilliCPU: 1000, Annotations: map[string]string{
			"pool.cpupool.dev/container.fwd": "exclusive", "pool.cpupool.dev/pod": "shared"}}, pools.Exclusive},
		{"pod annotation wins over bare key", Container{Name: "log", Pod: PodRef{Namespace: "telco"}, Annotations: map[string]string{
			"pool.cpupool.dev/container.fwd": "exclusive", "pool.cpupool.dev/pod": "shared", "pool.cpupool.dev": "infra"}}, pools.Shared},
		{"bare key", Container{Name: "x", Pod: PodRef{Namespace: "any"}, Annotations: map[string]string{"pool.cpupool.dev": "shared"}}, pools.Shared},
		{"foreign annotations are ignored", Container{Name: "x", Annotations: map[string]string{"example.com/pool": "whatever"}}, pools.Infra},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := p.Request(tc.c, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.pool, req.Pool)
		})
	}
}

// TestPolicySaysWhenNamespaceKeepsGuaranteedOutOfExclusive: a Guaranteed
// container of whole CPUs that guaranteedExclusive would make exclusive,
// in a namespace the pool's allowedNamespaces leaves out, goes to the
// default pool, and the request names the pool it did not get, so that
// the plugin tells the pod (docs/pools.md: never silently). Every other
// container that goes to the default pool names none.
func TestPolicySaysWhenNamespaceKeepsGuaranteedOutOfExclusive(t *testing.T) {
	p := NewPolicy(parseConfig(t, "guaranteedExclusive: true\nallowedNamespaces: {exclusive: [telco]}"), nil)
	req, err := p.Request(Container{Name: "app", Pod: PodRef{Namespace: "web"}, QoS: QoSGuaranteed, MilliCPU: 2000}, nil)
	require.NoError(t, err)
	assert.Equal(t, pools.Infra, req.Pool)
	assert.Equal(t, pools.Exclusive, req.NotAllowed)
	for _, c := range []Container{
		{Name: "app", Pod: PodRef{Namespace: "telco"}, QoS: QoSGuaranteed, MilliCPU: 2000},
		{Name: "app", Pod: PodRef{Namespace: "web"}, QoS: QoSGuaranteed, MilliCPU: 1500},
		{Name: "app", Pod: PodRef{Namespace: "web"}, QoS: QoSBurstable, MilliCPU: 2000},
	} {
		req, err := p.Request(c, nil)
		require.NoError(t, err)
		assert.Empty(t, req.NotAllowed, "%+v", c)
	}

	// The device plugin's route: guaranteedExclusive gives
	// exclusive-non-isolcpus, whose allowedNamespaces apply.
	p = NewPolicy(parseConfig(t, "guaranteedExclusive: true\nkubelet: {devicePlugin: true}\npools: {exclusive-non-isolcpus: {enabled: true}}\nallowedNamespaces: {exclusive-non-isolcpus: [telco]}"), nil)
	req, err = p.Request(Container{Name: "app", Pod: PodRef{Namespace: "web"}, QoS: QoSGuaranteed, MilliCPU: 2000}, nil)
	require.NoError(t, err)
	assert.Equal(t, pools.ExclusiveNonIsolcpus, req.NotAllowed)
	assert.Contains(t, req.Rule.Detail, "allowedNamespaces.exclusive-non-isolcpus")
}

func TestPolicyOptionsAndHints(t *testing.T) {
	p := NewPolicy(parseConfig(t, "allocation: {hideHyperthreads: true}"), nil)
	resolve := func(path string) (int, error) {
		if path == "/sys/class/net/eth1" {
			return 1, nil
		}
		return -1, errors.New("no such device")
	}
	req, err := p.Request(Container{Name: "c", MilliCPU: 2000, Annotations: map[string]string{
		"pool.cpupool.dev":                        "exclusive",
		"hide-hyperthreads.cpupool.dev/pod":       "false",
		"distribute-across-numa.cpupool.dev":      "true",
		"full-pcpus-only.cpupool.dev/container.c": "1",
		"numa.cpupool.dev":                        "0-1",
		"device.cpupool.dev":                      "/sys/class/net/eth1",
	}}, resolve)
	require.NoError(t, err)
	assert.False(t, req.Options.HideHyperthreads, "annotation overrides config")
	assert.True(t, req.Options.DistributeAcrossNUMA)
	assert.True(t, req.Options.FullPCPUsOnly)
	assert.Equal(t, "0-1", req.NUMANodes.String())
	assert.Equal(t, "1", req.PreferNUMA.String())

	req, err = p.Request(Container{Name: "c", MilliCPU: 1000, DeviceNUMA: cpuset.New(0), Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}, resolve)
	require.NoError(t, err)
	assert.Equal(t, "0", req.PreferNUMA.String(), "devices from the runtime are hints")
	assert.True(t, req.Options.HideHyperthreads, "config default")
}

func TestPolicyRefusesBadAnnotations(t *testing.T) {
	p := NewPolicy(parseConfig(t, "allowedNamespaces: {exclusive: [telco]}"), nil)
	tests := []struct {
		name string
		ann  map[string]string
		ns   string
		mcpu int64
		want string
	}{
		{"unknown pool", map[string]string{"pool.cpupool.dev": "turbo"}, "telco", 1000, `annotation pool.cpupool.dev="turbo": unknown pool`},
		{"namespace not allowed", map[string]string{"pool.cpupool.dev/pod": "exclusive"}, "web", 1000, `annotation pool.cpupool.dev/pod="exclusive": namespace "web" may not use pool exclusive`},
		{"exclusive without request", map[string]string{"pool.cpupool.dev": "exclusive"}, "telco", 0, "requests no CPU"},
		{"unknown key", map[string]string{"poool.cpupool.dev": "exclusive"}, "telco", 1000, `annotation poool.cpupool.dev="exclusive": unknown annotation`},
		{"unknown scope", map[string]string{"pool.cpupool.dev/containr.x": "shared"}, "telco", 1000, `unknown scope "containr.x"`},
		{"bad boolean", map[string]string{"hide-hyperthreads.cpupool.dev": "yes please"}, "telco", 1000, "not a boolean"},
		{"container name no pod has", map[string]string{"pool.cpupool.dev/container.My_App": "shared"}, "telco", 1000, `annotation pool.cpupool.dev/container.My_App="shared": names a container no pod can have`},
		{"empty container name", map[string]string{"pool.cpupool.dev/container.": "shared"}, "telco", 1000, "names a container no pod can have"},
		{"bad NUMA list", map[string]string{"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": "zero"}, "telco", 1000, "not a NUMA node list"},
		{"NUMA for a shared pool", map[string]string{"numa.cpupool.dev": "0"}, "telco", 1000, "applies to exclusive pools only"},
		{"unknown device", map[string]string{"pool.cpupool.dev": "exclusive", "device.cpupool.dev": "/sys/class/net/nope"}, "telco", 1000, "not a sysfs device with a known NUMA node"},
	}
	resolve := func(string) (int, error) { return -1, errors.New("no such device") }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Request(Container{Name: "c", Pod: PodRef{Namespace: tc.ns}, MilliCPU: tc.mcpu, Annotations: tc.ann}, resolve)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var ae *AnnotationError
			assert.True(t, errors.As(err, &ae))
		})
	}
}

// Hostile annotations are refused quickly, with errors that repeat a short
// prefix only. Before bounds, "0-3000000" cost seconds and hundreds of MiB,
// and a range to the largest int64 never returned.
func TestPolicyBoundsHostileAnnotations(t *testing.T) {
	p := NewPolicy(parseConfig(t, ""), topology(t, "kubelet-dual-socket-ht"))
	long := strings.Repeat("0,", 100000) + "0"
	manyDevices := strings.Repeat("/sys/class/net/eth0,", 1000) + "/sys/class/net/eth0"
	tests := []struct {
		name string
		ann  map[string]string
		want string
	}{
		{"NUMA range to int64 max", map[string]string{"numa.cpupool.dev": "0-9223372036854775807"}, "not a NUMA node list"},
		{"NUMA 0-3000000", map[string]string{"numa.cpupool.dev": "0-3000000"}, "not a NUMA node list"},
		{"NUMA node the node lacks", map[string]string{"numa.cpupool.dev": "2"}, "nodes 0-1"},
		{"NUMA +1", map[string]string{"numa.cpupool.dev": "+1"}, "not a NUMA node list"},
		{"long value", map[string]string{"numa.cpupool.dev": long}, "at most 512"},
		{"many list items", map[string]string{"numa.cpupool.dev": strings.Repeat("0,", 100) + "0"}, "at most 64"},
		{"many device paths", map[string]string{"device.cpupool.dev": manyDevices[:500]}, "at most 8"},
		{"long key", map[string]string{"pool.cpupool.dev/container." + strings.Repeat("x", 5000): "shared"}, "bytes)"},
		{"long bad boolean", map[string]string{"hide-hyperthreads.cpupool.dev": strings.Repeat("y", 600)}, "at most 512"},
	}
	calls := 0
	resolve := func(string) (int, error) { calls++; return 0, nil }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				ann := map[string]string{"pool.cpupool.dev": "exclusive"}
				for k, v := range tc.ann {
					ann[k] = v
				}
				_, err := p.Request(Container{Name: "c", Pod: PodRef{Namespace: "t"}, MilliCPU: 1000, Annotations: ann}, resolve)
				done <- err
			}()
			select {
			case err := <-done:
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				assert.Less(t, len(err.Error()), 400, "the error repeats the whole value")
			case <-time.After(10 * time.Second):
				t.Fatal("the policy did not return")
			}
		})
	}
	assert.Zero(t, calls, "device paths beyond the bound are never looked up")
}

// TestCheckAnnotationsAllocatesNothing: checking a pod with a few keys of
// ours, which every creation does twice before its reply (before the lock
// and in Request), allocates nothing (issue 45); with more keys than fit
// on the stack, the first bad key in sorted order is still the one named.
func TestCheckAnnotationsAllocatesNothing(t *testing.T) {
	ann := map[string]string{
		"pool.cpupool.dev": "exclusive", "numa.cpupool.dev/container.db": "0", "irq-isolation.cpupool.dev/pod": "true",
		"hide-hyperthreads.cpupool.dev": "true", "example.com/owner": "team-a", "kubernetes.io/config.seen": "x",
	}
	require.NoError(t, CheckAnnotations(ann))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = CheckAnnotations(ann) }))

	many := map[string]string{}
	for _, c := range "abcdefghijklmnopqrst" {
		many["pool.cpupool.dev/container."+string(c)] = "shared"
	}
	many["pool.cpupool.dev/container.Z"] = "shared"
	many["pool.cpupool.dev/container.Y"] = "shared"
	err := CheckAnnotations(many)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "container.Y", "the first bad key in sorted order")
}

// TestRequestMakesNoSetOnlyToReplaceIt: a request's NUMA sets come back
// empty and not nil (cpuset's Equals tells the two apart), whether the
// container's DeviceNUMA is a zero set or an empty one, and building a
// request for a pool annotation, alone or among the kubelet's, allocates
// nothing: the request stays on the stack, the annotations are gathered
// there, the rule's detail is a constant and the empty sets are the
// policy's one (issue 45).
func TestRequestMakesNoSetOnlyToReplaceIt(t *testing.T) {
	p := NewPolicy(parseConfig(t, ""), topology(t, "kubelet-dual-socket-ht"))
	for _, devs := range []cpuset.CPUSet{{}, cpuset.New()} {
		c := Container{ID: "c1", Name: "c", Pod: PodRef{Namespace: "t", Name: "p", UID: "u"}, MilliCPU: 2000,
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}, DeviceNUMA: devs}
		req, err := p.Request(c, nil)
		require.NoError(t, err)
		assert.True(t, req.NUMANodes.Equals(cpuset.New()), "NUMANodes %#v", req.NUMANodes)
		assert.True(t, req.PreferNUMA.Equals(cpuset.New()), "PreferNUMA %#v", req.PreferNUMA)
		allocs := testing.AllocsPerRun(100, func() { _, _ = p.Request(c, nil) })
		assert.Zero(t, allocs, "allocations of a pool annotation's request")
		c.Annotations = map[string]string{"pool.cpupool.dev/pod": "exclusive", "kubernetes.io/config.seen": "2026-12-07T19:21:03Z",
			"kubernetes.io/config.source": "api"}
		assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = p.Request(c, nil) }), "with the kubelet's annotations")
	}
}

// TestRequestRuleDetailIsTheAnnotation: the rule of a pool annotation
// says the key and the value as the pod wrote them, whether the detail is
// one of the constants for the pod-wide keys or made for another.
func TestRequestRuleDetailIsTheAnnotation(t *testing.T) {
	p := NewPolicy(parseConfig(t, ""), nil)
	for _, ann := range []map[string]string{
		{"pool.cpupool.dev": "exclusive"}, {"pool.cpupool.dev/pod": "exclusive-non-isolcpus"},
		{"pool.cpupool.dev/pod": "shared"}, {"pool.cpupool.dev": "infra"}, {"pool.cpupool.dev": " shared "},
		{"pool.cpupool.dev/container.c": "exclusive"},
	} {
		req, err := p.Request(Container{Name: "c", MilliCPU: 1000, Annotations: ann}, nil)
		require.NoError(t, err, "%v", ann)
		for k, v := range ann {
			assert.Equal(t, Rule{Kind: RuleAnnotation, Detail: k + "=" + v}, req.Rule)
		}
	}
}

// A device that cannot be resolved gets the same error whatever the
// reason, so a tenant cannot probe which host paths exist.
func TestPolicyDeviceErrorsRevealNothing(t *testing.T) {
	p := NewPolicy(parseConfig(t, ""), nil)
	var msgs []string
	for _, reason := range []error{errors.New("stat /sys/x: no such file or directory"), errors.New("permission denied"), errors.New("no numa_node")} {
		_, err := p.Request(Container{Name: "c", MilliCPU: 1000, Annotations: map[string]string{
			"pool.cpupool.dev": "exclusive", "device.cpupool.dev": "/sys/x"}}, func(string) (int, error) { return 0, reason })
		require.Error(t, err)
		msgs = append(msgs, err.Error())
	}
	assert.Equal(t, msgs[0], msgs[1])
	assert.Equal(t, msgs[0], msgs[2])
	assert.NotContains(t, msgs[0], "no such file")
}

// TestIsDNSLabel: the container names Kubernetes allows, and no others.
func TestIsDNSLabel(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "0": true, "web": true, "web-2": true, "a-b-c": true, strings.Repeat("a", 63): true,
		"": false, "Web": false, "my_app": false, "-a": false, "a-": false, "a.b": false, "é": false,
		strings.Repeat("a", 64): false,
	} {
		assert.Equal(t, want, isDNSLabel(name), "%q", name)
	}
}
