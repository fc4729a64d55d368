package allocator

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestRefusalReasons: each refusal of the policy and the allocator carries
// the reason the plugin counts it under, whatever wraps it.
func TestRefusalReasons(t *testing.T) {
	kubelet := NewPolicy(parseConfig(t, "kubelet: {devicePlugin: true}\nallowedNamespaces: {exclusive: [telco]}\n"), nil)
	annotated := NewPolicy(parseConfig(t, "allowedNamespaces: {exclusive: [telco]}\n"), nil)
	full := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"4-7,12-15\"\n")
	tests := []struct {
		name   string
		refuse func() error
		reason string
		says   string
	}{
		{"unknown annotation", func() error {
			return CheckAnnotations(map[string]string{"nope.cpupool.dev": "x"})
		}, ReasonAnnotation, "unknown annotation"},
		{"unknown pool", func() error {
			_, err := annotated.Request(Container{Name: "c", Pod: PodRef{Namespace: "telco"}, MilliCPU: 1000, Annotations: map[string]string{"pool.cpupool.dev": "turbo"}}, nil)
			return err
		}, ReasonAnnotation, "unknown pool"},
		{"namespace, by annotation", func() error {
			_, err := annotated.Request(Container{Name: "c", Pod: PodRef{Namespace: "web"}, MilliCPU: 1000, Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}, nil)
			return err
		}, ReasonAnnotation, `namespace "web" may not use pool exclusive`},
		{"namespace, by the kubelet's resource", func() error {
			_, err := kubelet.Request(Container{Name: "c", Pod: PodRef{Namespace: "web"}, KubeletCPUs: cpuset.New(4)}, nil)
			return err
		}, ReasonNamespace, `namespace "web" may not use pool exclusive (allowedNamespaces.exclusive: [telco]); a ResourceQuota`},
		{"pool full", func() error {
			_, err := full.Allocate(Request{ID: "big", Pod: PodRef{Namespace: "telco", Name: "p"}, Container: "c", Pool: pools.Exclusive, MilliCPU: 64000,
				NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()})
			return err
		}, ReasonPlacement, "pool exclusive cannot fit container telco/p/c"},
		{"kubelet's CPUs held", func() error {
			_, err := full.Allocate(Request{ID: "a", Pool: pools.Exclusive, CPUs: cpuset.New(1)})
			return err
		}, ReasonPlacement, ""},
		{"grant, marked by the plugin", func() error {
			return &Refusal{Reason: ReasonGrant, Err: errors.New("unknown grant token")}
		}, ReasonGrant, "unknown grant token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.refuse()
			require.Error(t, err)
			assert.Equal(t, tc.reason, ReasonOf(err))
			assert.Contains(t, err.Error(), tc.says)
			wrapped := fmt.Errorf("nri-cpupool: container x: %w", err)
			assert.Equal(t, tc.reason, ReasonOf(wrapped), "the reason survives wrapping")
		})
	}
}
