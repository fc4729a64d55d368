package allocator

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

func TestPolicyChoosesPool(t *testing.T) {
	cfg := parseConfig(t, "guaranteedExclusive: true\nallowedNamespaces: {exclusive: [telco, trading], shared: [\"*\"]}")
	p := NewPolicy(cfg)
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

func TestPolicyOptionsAndHints(t *testing.T) {
	p := NewPolicy(parseConfig(t, "allocation: {hideHyperthreads: true}"))
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
	p := NewPolicy(parseConfig(t, "allowedNamespaces: {exclusive: [telco]}"))
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
		{"bad NUMA list", map[string]string{"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": "zero"}, "telco", 1000, "not a NUMA node list"},
		{"NUMA for a shared pool", map[string]string{"numa.cpupool.dev": "0"}, "telco", 1000, "applies to exclusive pools only"},
		{"unknown device", map[string]string{"pool.cpupool.dev": "exclusive", "device.cpupool.dev": "/sys/class/net/nope"}, "telco", 1000, "no such device"},
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
