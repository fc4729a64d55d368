package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// TestPolicyIRQIsolation: the pool's mode decides, the annotation chooses
// where the mode lets it, and asking for what the pool does not offer is
// refused with the key to change.
func TestPolicyIRQIsolation(t *testing.T) {
	const key = "irq-isolation.cpupool.dev"
	tests := []struct {
		name   string
		config string
		pool   string
		ann    map[string]string
		want   bool
		err    string
	}{
		{"off, no annotation", "", pools.Exclusive, nil, false, ""},
		{"off, asked", "", pools.Exclusive, map[string]string{key: "true"}, false, "pool exclusive does not offer IRQ isolation (pools.exclusive.irqIsolation is off)"},
		{"off, declined", "", pools.Exclusive, map[string]string{key: "false"}, false, ""},
		{"optIn, no annotation", "pools: {exclusive: {irqIsolation: optIn}}", pools.Exclusive, nil, false, ""},
		{"optIn, asked by the container", "pools: {exclusive: {irqIsolation: optIn}}", pools.Exclusive, map[string]string{key + "/container.c": "true", key + "/pod": "false"}, true, ""},
		{"optIn, declined by the container", "pools: {exclusive: {irqIsolation: optIn}}", pools.Exclusive, map[string]string{key + "/container.c": "false", key: "true"}, false, ""},
		{"optOut, no annotation", "pools: {exclusive: {irqIsolation: optOut}}", pools.Exclusive, nil, true, ""},
		{"optOut, declined", "pools: {exclusive: {irqIsolation: optOut}}", pools.Exclusive, map[string]string{key + "/pod": "false"}, false, ""},
		{"always", "pools: {exclusive: {irqIsolation: always}}", pools.Exclusive, nil, true, ""},
		{"always, declined", "pools: {exclusive: {irqIsolation: always}}", pools.Exclusive, map[string]string{key: "false"}, false, "keeps its CPUs free of IRQs for every container (pools.exclusive.irqIsolation: always)"},
		{"exclusive-non-isolcpus optIn", "pools: {exclusive-non-isolcpus: {enabled: true, irqIsolation: optIn}}", pools.ExclusiveNonIsolcpus, map[string]string{key: "true"}, true, ""},
		{"exclusive-non-isolcpus not configured", "pools: {exclusive-non-isolcpus: {enabled: true}, exclusive: {irqIsolation: optOut}}", pools.ExclusiveNonIsolcpus, nil, false, ""},
		{"shared container asks", "pools: {shared: {cpus: \"2\", irqIsolation: always}}", pools.Shared, map[string]string{key: "true"}, false, "IRQ isolation is for containers with exclusive CPUs, and the container goes to shared, whose CPUs are kept free of IRQs anyway"},
		{"infra container declines", "pools: {exclusive: {irqIsolation: optOut}}", pools.Infra, map[string]string{key: "false"}, false, ""},
		{"not a boolean", "pools: {exclusive: {irqIsolation: optIn}}", pools.Exclusive, map[string]string{key: "yes please"}, false, `annotation irq-isolation.cpupool.dev="yes please": not a boolean`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(parseConfig(t, tc.config), nil)
			ann := map[string]string{"pool.cpupool.dev": tc.pool}
			for k, v := range tc.ann {
				ann[k] = v
			}
			req, err := p.Request(Container{Name: "c", Pod: PodRef{Namespace: "telco"}, MilliCPU: 1000, Annotations: ann}, nil)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, req.IsolateIRQs)
		})
	}
}

// TestIsolateIRQsIsCarried: the decision is the assignment's, through a
// stop and the hold, into the container's next run.
func TestIsolateIRQsIsCarried(t *testing.T) {
	a := newAllocator(t, "desktop-8c16t", "isolatedCPUs: \"2-3\"")
	req := exclusive("c1", 1)
	req.IsolateIRQs = true
	res, err := a.Allocate(req)
	require.NoError(t, err)
	assert.True(t, res.Assignment.IsolateIRQs)
	a.Stop("c1", nil)
	holds := a.Holds()
	require.Len(t, holds, 1)
	assert.True(t, holds[0].IsolateIRQs, "held CPUs stay free of IRQs")
	assert.Equal(t, res.Assignment.Held().String(), a.IRQIsolated().String())

	other := exclusive("c2", 1)
	_, err = a.Allocate(other)
	require.NoError(t, err)
	assert.Equal(t, res.Assignment.Held().String(), a.IRQIsolated().String(), "a container that did not ask adds nothing")
	a.ReleasePod("uid-c1")
	assert.True(t, a.IRQIsolated().IsEmpty(), "the pod ended: nothing kept free")
}

// TestPolicyIsolatedPartition: like IRQ isolation, without always.
func TestPolicyIsolatedPartition(t *testing.T) {
	const key = "isolated-partition.cpupool.dev"
	for _, tc := range []struct {
		name, config, pool string
		ann                map[string]string
		want               bool
		err                string
	}{
		{"off", "", pools.Exclusive, nil, false, ""},
		{"off, asked", "", pools.Exclusive, map[string]string{key: "true"}, false, "pool exclusive does not offer isolated partitions (pools.exclusive.isolatedPartition is off)"},
		{"optIn, asked", "pools: {exclusive: {isolatedPartition: optIn}}", pools.Exclusive, map[string]string{key + "/container.c": "true"}, true, ""},
		{"optIn, not asked", "pools: {exclusive: {isolatedPartition: optIn}}", pools.Exclusive, nil, false, ""},
		{"optOut", "pools: {exclusive-non-isolcpus: {enabled: true, isolatedPartition: optOut}}", pools.ExclusiveNonIsolcpus, nil, true, ""},
		{"optOut, declined", "pools: {exclusive-non-isolcpus: {enabled: true, isolatedPartition: optOut}}", pools.ExclusiveNonIsolcpus, map[string]string{key: "false"}, false, ""},
		{"shared asks", "pools: {shared: {cpus: \"2\"}}", pools.Shared, map[string]string{key: "true"}, false, "an isolated partition is for containers with exclusive CPUs"},
		{"not a boolean", "pools: {exclusive: {isolatedPartition: optIn}}", pools.Exclusive, map[string]string{key: "isolated"}, false, "not a boolean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(parseConfig(t, tc.config), nil)
			ann := map[string]string{"pool.cpupool.dev": tc.pool}
			for k, v := range tc.ann {
				ann[k] = v
			}
			req, err := p.Request(Container{Name: "c", Pod: PodRef{Namespace: "telco"}, MilliCPU: 1000, Annotations: ann}, nil)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, req.IsolatedPartition)
		})
	}
}

// TestUnknownAnnotationNamesTheKnownOnes: the error lists every key, the
// domain once, and stays short.
func TestUnknownAnnotationNamesTheKnownOnes(t *testing.T) {
	err := CheckAnnotations(map[string]string{"irq-isolate.cpupool.dev": "true"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "known keys are {pool,numa,device,hide-hyperthreads,full-pcpus-only,distribute-across-numa,disable-cpu-quota,irq-isolation,isolated-partition,power-class,shared-cpus}.cpupool.dev")
	assert.Less(t, len(err.Error()), 300)
}
