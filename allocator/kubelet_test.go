package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
)

// TestPolicyWithDevicePlugin: the resource decides the pool; annotations
// cannot reach the exclusive pool nor contradict the kubelet.
func TestPolicyWithDevicePlugin(t *testing.T) {
	on := "kubelet: {devicePlugin: true}\nguaranteedExclusive: true\nallowedNamespaces: {exclusive: [telco]}\n"
	tests := []struct {
		name, cfg string
		c         Container
		pool      string
		err       string
	}{
		{"resource", on, Container{Name: "a", Pod: PodRef{Namespace: "telco"}, KubeletCPUs: cpuset.New(4, 5)}, pools.Exclusive, ""},
		{"resource and agreeing annotation", on, Container{Name: "a", Pod: PodRef{Namespace: "telco"}, KubeletCPUs: cpuset.New(4),
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}, pools.Exclusive, ""},
		{"resource and other pool", on, Container{Name: "a", Pod: PodRef{Namespace: "telco"}, KubeletCPUs: cpuset.New(4),
			Annotations: map[string]string{"pool.cpupool.dev": "shared"}}, "", "the container requests cpupool.dev/exclusive"},
		{"resource and numa annotation", on, Container{Name: "a", Pod: PodRef{Namespace: "telco"}, KubeletCPUs: cpuset.New(4),
			Annotations: map[string]string{"numa.cpupool.dev": "1"}}, "", "align them with its Topology Manager"},
		{"resource, namespace not allowed", on, Container{Name: "a", Pod: PodRef{Namespace: "web"}, KubeletCPUs: cpuset.New(4)}, "", "ResourceQuota"},
		{"annotation refused", on, Container{Name: "a", Pod: PodRef{Namespace: "telco"}, MilliCPU: 1000,
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}, "", "given only through the resource"},
		{"annotation exclusive-non-isolcpus still works", on + "pools: {exclusive-non-isolcpus: {enabled: true}}\n", Container{Name: "a", Pod: PodRef{Namespace: "x"}, MilliCPU: 1000,
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}}, pools.ExclusiveNonIsolcpus, ""},
		{"guaranteed without enis: default", on, Container{Name: "a", Pod: PodRef{Namespace: "telco"}, QoS: QoSGuaranteed, MilliCPU: 2000}, pools.Infra, ""},
		{"guaranteed with enis", on + "pools: {exclusive-non-isolcpus: {enabled: true}}\n", Container{Name: "a", Pod: PodRef{Namespace: "telco"}, QoS: QoSGuaranteed, MilliCPU: 2000}, pools.ExclusiveNonIsolcpus, ""},
		{"off: annotation works", "guaranteedExclusive: true\n", Container{Name: "a", Pod: PodRef{Namespace: "telco"}, MilliCPU: 1000,
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}, pools.Exclusive, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := NewPolicy(parseConfig(t, tc.cfg), nil).Request(tc.c, nil)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.pool, req.Pool)
			assert.True(t, req.CPUs.Equals(tc.c.KubeletCPUs), "exact CPUs %s", req.CPUs)
		})
	}
}

// TestCPUQuotaOneRuleForEveryRoute: the CFS quota of an exclusive
// container is lifted whether the kubelet chose its CPUs or the allocator
// did, on creation and on adoption, and kept where the options keep it.
func TestCPUQuotaOneRuleForEveryRoute(t *testing.T) {
	lifted, kept := config.Allocation{DisableCPUQuota: true}, config.Allocation{}
	for _, tc := range []struct {
		name string
		req  Request
		want bool
	}{
		{"kubelet's CPUs", Request{Pool: pools.Exclusive, CPUs: cpuset.New(5, 13), MilliCPU: 10, Options: lifted}, true},
		{"kubelet's CPUs, quota kept", Request{Pool: pools.Exclusive, CPUs: cpuset.New(5, 13), MilliCPU: 10, Options: kept}, false},
		{"annotation", Request{Pool: pools.Exclusive, MilliCPU: 2000, Options: lifted}, true},
		{"annotation, quota kept", Request{Pool: pools.Exclusive, MilliCPU: 2000, Options: kept}, false},
		{"infra", Request{Pool: pools.Infra, MilliCPU: 2000, Options: lifted}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, adopt := range []bool{false, true} {
				a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\npools: {exclusive: {cpus: \"4-7,12-15\"}}\n")
				req := tc.req
				req.ID, req.Container, req.Pod = "c", "c", PodRef{UID: "u", Namespace: "n", Name: "p"}
				req.NUMANodes, req.PreferNUMA = cpuset.New(), cpuset.New()
				var res Result
				var err error
				if adopt {
					res, _, err = a.Adopt(req, req.CPUs, cpuset.New())
				} else {
					res, err = a.Allocate(req)
				}
				require.NoError(t, err)
				assert.Equal(t, tc.want, res.Assignment.NoCPUQuota, "adopt %v", adopt)
			}
		})
	}
}

// TestExactPlacement: kubelet-chosen CPUs are taken as they are, and
// refused when held, offline or outside the pool.
func TestExactPlacement(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-7,10-15\"\npools: {exclusive: {cpus: \"4-7,12-15\"}}\n")
	res, err := a.Allocate(Request{ID: "a", Pool: pools.Exclusive, CPUs: cpuset.New(5, 13)})
	require.NoError(t, err)
	assert.Equal(t, "5,13", res.Assignment.CPUs.String())
	_, err = a.Allocate(Request{ID: "b", Pool: pools.Exclusive, CPUs: cpuset.New(13, 14)})
	require.ErrorContains(t, err, "CPU 13 by the kubelet, but container a still holds it")
	_, err = a.Allocate(Request{ID: "c", Pool: pools.Exclusive, CPUs: cpuset.New(1)})
	require.ErrorContains(t, err, "outside pool exclusive")
	a.Release("a")
	_, err = a.Allocate(Request{ID: "b", Pool: pools.Exclusive, CPUs: cpuset.New(13, 14)})
	require.NoError(t, err)

	// Preferred leaves nothing behind.
	free := a.FreeCPUs(pools.Exclusive)
	got, err := a.Preferred(pools.Exclusive, free, cpuset.New(), 2, config.Allocation{})
	require.NoError(t, err)
	assert.Equal(t, 2, got.Size())
	assert.True(t, got.IsSubsetOf(free))
	assert.True(t, free.Equals(a.FreeCPUs(pools.Exclusive)), "Preferred changes nothing")
}
