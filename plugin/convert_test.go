package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
)

func TestMilliCPUAndQoS(t *testing.T) {
	ctr := func(cpu *api.LinuxCPU) *api.Container {
		return &api.Container{Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: cpu}}}
	}
	assert.Equal(t, int64(1500), milliCPU(ctr(&api.LinuxCPU{Shares: api.UInt64(1536)})))
	assert.Equal(t, int64(100), milliCPU(ctr(&api.LinuxCPU{Shares: api.UInt64(102)})))
	assert.Equal(t, int64(0), milliCPU(ctr(&api.LinuxCPU{Shares: api.UInt64(2)})), "besteffort")
	assert.Equal(t, int64(2500), milliCPU(ctr(&api.LinuxCPU{Quota: api.Int64(250000), Period: api.UInt64(100000)})), "limit without shares")
	assert.Equal(t, int64(0), milliCPU(&api.Container{}))

	pod := func(parent string) *api.PodSandbox {
		return &api.PodSandbox{Linux: &api.LinuxPodSandbox{CgroupParent: parent}}
	}
	assert.Equal(t, "guaranteed", qosClass(pod("/kubepods/podabc")))
	assert.Equal(t, "burstable", qosClass(pod("/kubepods/burstable/podabc")))
	assert.Equal(t, "besteffort", qosClass(pod("kubepods-besteffort-podabc.slice")))
	assert.Equal(t, "", qosClass(pod("")))
}
