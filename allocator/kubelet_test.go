package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
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

// TestExactPlacementOfflineHeldCPU: a container of the kubelet's devices
// (or of a claim) restarted while a CPU of its pod's hold is offline
// starts on the others and keeps the offline one, as a running container
// keeps it; a CPU its pod never held that is offline is refused, and so
// is a restart none of whose CPUs is online.
func TestExactPlacementOfflineHeldCPU(t *testing.T) {
	cfgYAML := "isolatedCPUs: \"2-7,10-15\"\npools: {exclusive: {cpus: \"4-7,12-15\"}}\n"
	a := newAllocator(t, "desktop-8c16t", cfgYAML)
	pod := PodRef{Namespace: "ns", Name: "dpdk", UID: "uid-dpdk"}
	req := func(id string, cpus ...int) Request {
		return Request{ID: id, Pod: pod, Container: "app", Pool: pools.Exclusive, CPUs: cpuset.New(cpus...)}
	}
	_, err := a.Allocate(req("run1", 6, 14))
	require.NoError(t, err)
	off := withOffline(a.Topology(), 14, 15)
	l, _ := HotplugLayout(a.Layout(), off, parseConfig(t, cfgYAML))
	a, _ = a.Rebase(off, l)
	a.Stop("run1", nil)

	_, err = a.Allocate(req("stranger", 15))
	require.ErrorContains(t, err, "was given CPU 15 by the kubelet, which is not online", "15 was never the pod's")
	other := Request{ID: "other", Pod: PodRef{Namespace: "ns", Name: "x", UID: "uid-x"}, Container: "app", Pool: pools.Exclusive, CPUs: cpuset.New(7, 14)}
	_, err = a.Allocate(other)
	require.ErrorContains(t, err, "CPU 14 by the kubelet, which is not online", "another pod's hold is not this pod's")

	res, err := a.Allocate(req("run2", 6, 14))
	require.NoError(t, err, "its own hold's offline CPU")
	assert.Equal(t, "6,14", res.Assignment.CPUs.String(), "the record keeps the offline CPU")
	assert.Equal(t, map[string]cpuset.CPUSet{"run2": cpuset.New(14)}, a.OfflineHeld())

	a.Stop("run2", nil)
	b, _ := a.Rebase(withOffline(a.Topology(), 6), mustHotplug(t, a, withOffline(a.Topology(), 6), cfgYAML))
	_, err = b.Allocate(req("run3", 6, 14))
	require.ErrorContains(t, err, "none of them is online")
}

func mustHotplug(t *testing.T, a *Allocator, topo *sysfs.Topology, cfgYAML string) *Layout {
	t.Helper()
	l, problems := HotplugLayout(a.Layout(), topo, parseConfig(t, cfgYAML))
	require.False(t, problems.HasErrors(), "%v", problems)
	return l
}
