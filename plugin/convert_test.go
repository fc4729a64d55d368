package plugin

import (
	"math"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
)

func TestMilliCPUAndQoS(t *testing.T) {
	milliOf1 := func(c *api.Container) int64 {
		m, _ := milliCPU(c, "burstable")
		return m
	}
	ctr := func(cpu *api.LinuxCPU) *api.Container {
		return &api.Container{Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: cpu}}}
	}
	assert.Equal(t, int64(1500), milliOf1(ctr(&api.LinuxCPU{Shares: api.UInt64(1536)})))
	assert.Equal(t, int64(100), milliOf1(ctr(&api.LinuxCPU{Shares: api.UInt64(102)})))
	assert.Equal(t, int64(0), milliOf1(ctr(&api.LinuxCPU{Shares: api.UInt64(2)})), "besteffort")
	assert.Equal(t, int64(2500), milliOf1(ctr(&api.LinuxCPU{Quota: api.Int64(250000), Period: api.UInt64(100000)})), "limit without shares")
	assert.Equal(t, int64(2500), milliOf1(ctr(&api.LinuxCPU{Shares: api.UInt64(0), Quota: api.Int64(250000), Period: api.UInt64(100000)})), "limit with shares 0")
	// The kubelet's shares are the request, however large the limit: 2
	// shares are its minimum (no request, 1m or 2m), 1 no kubelet sends.
	for _, shares := range []uint64{1, 2} {
		assert.Equal(t, int64(0), milliOf1(ctr(&api.LinuxCPU{Shares: api.UInt64(shares), Quota: api.Int64(800000), Period: api.UInt64(100000)})), "shares %d, limit 8", shares)
	}
	assert.Equal(t, int64(3), milliOf1(ctr(&api.LinuxCPU{Shares: api.UInt64(3), Quota: api.Int64(800000), Period: api.UInt64(100000)})), "3m, limit 8")
	assert.Equal(t, int64(0), milliOf1(&api.Container{}))
	// Finding 8: values no kernel accepts must not overflow into a small or
	// negative request.
	for _, cpu := range []*api.LinuxCPU{
		{Shares: api.UInt64(uint64(math.MaxUint64))},
		{Shares: api.UInt64(math.MaxInt64)},
		{Quota: api.Int64(math.MaxInt64), Period: api.UInt64(100000)},
		{Quota: api.Int64(math.MaxInt64), Period: api.UInt64(uint64(math.MaxUint64))},
		{Quota: api.Int64(math.MaxInt64), Period: api.UInt64(1)},
	} {
		m := milliOf1(ctr(cpu))
		assert.True(t, m == 0 || m >= 64000, "%v: %d", cpu, m)
	}

	pod := func(parent string) *api.PodSandbox {
		return &api.PodSandbox{Linux: &api.LinuxPodSandbox{CgroupParent: parent}}
	}
	assert.Equal(t, "guaranteed", qosClass(pod("/kubepods/podabc")))
	assert.Equal(t, "burstable", qosClass(pod("/kubepods/burstable/podabc")))
	assert.Equal(t, "besteffort", qosClass(pod("kubepods-besteffort-podabc.slice")))
	assert.Equal(t, "", qosClass(pod("")))
}
