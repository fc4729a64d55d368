package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
)

// A kubelet run with cpuCFSQuota: false passes no CFS quota for any
// container. A Guaranteed container of 300 CPUs then arrives as shares
// 262144 without quota; the exclusive pool refuses it (its size cannot be
// known), and must say why (no CFS quota) and what works (the
// cpupool.dev/exclusive resource), not "make the pod Guaranteed", which it
// is. A Burstable one is still told to make its pod Guaranteed.
func TestRequestAtTheSharesCapWithoutQuotaIsRefusedWithTheTrueReason(t *testing.T) {
	pol := allocator.NewPolicy(config.Default(), nil)
	refusal := func(qos string) string {
		milli, atLeast := milliOf(&api.LinuxCPU{Shares: api.UInt64(1 << 18)}, qos)
		_, err := pol.Request(allocator.Container{ID: "c", Name: "app", QoS: qos, MilliCPU: milli, MilliCPUAtLeast: atLeast,
			Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}, nil)
		require.Error(t, err, qos)
		return err.Error()
	}
	g := refusal(allocator.QoSGuaranteed)
	assert.NotContains(t, g, "make the pod Guaranteed", "the pod is Guaranteed; its kubelet sets no CFS quota (cpuCFSQuota: false)")
	assert.Contains(t, g, "cpuCFSQuota: false")
	assert.Contains(t, g, config.ResourceExclusive)
	assert.Contains(t, refusal(allocator.QoSBurstable), "make the pod Guaranteed (limits.cpu = requests.cpu)")
}
