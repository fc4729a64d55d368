package plugin

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/pools"
)

// TestUpgradedClaimContainerRestartsWhereItRan (review 59c): a DRA claim
// of exclusive-non-isolcpus that an older release prepared on isolated
// CPUs of infra (it lent them before 45be3fd) keeps them after the
// upgrade; its container is kept where it runs at the restart (Readmit),
// and when it restarts in the same pod (a crash: the kubelet does not
// prepare the claim again) it is created there again: the pod's own hold.
// Before, that creation was refused at every retry until the pod was
// deleted. The older release is stood
// for by a config that does not isolate 36-39,76-79 (so they are lendable
// then), the upgraded one by the fixture's isolcpus (2-39,42-79), which
// leaves them to infra, where 45be3fd no longer lends them.
func TestUpgradedClaimContainerRestartsWhereItRan(t *testing.T) {
	f := newFakeRuntime(t, false)
	old := testNode{fixture: xeonDRA.fixture, config: "isolatedCPUs: \"2-35,42-75\"\n" + xeonDRA.config}
	first := startDRAOn(t, f, old)
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", qos: "besteffort"})
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "telco", Name: "claim-u1", UID: types.UID("u1")},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "cpus", Driver: dra.DriverName, Pool: "node-a",
				Device: dra.GroupName(pools.ExclusiveNonIsolcpus, 0), ShareID: ptr.To(types.UID("share-u1")),
				ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{dra.CapacityCPUs: *resource.NewQuantity(4, resource.DecimalSI)}}}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: types.UID(pod.Uid)}}}}
	res, err := first.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)
	env := first.cdiEnv(t, "u1")
	cpus, err := cpuset.Parse(first.claimCPUs(t, "u1"))
	require.NoError(t, err)
	require.False(t, cpus.Intersection(cpuset.New(36, 37, 38, 39, 76, 77, 78, 79)).IsEmpty(), "the claim has CPUs isolated after the upgrade: %s", cpus)
	ctr, resp, err := f.createWithEnv(pod, "app", 10, env...)
	require.NoError(t, err)
	require.Equal(t, cpus.String(), resp.Adjust.Linux.Resources.Cpu.Cpus)
	require.NoError(t, first.p.Flush())
	first.stop()

	second := startDRAOn(t, f, xeonDRA) // the upgrade: same node, its isolcpus
	require.Equal(t, cpus.String(), f.cpus(ctr), "kept where it runs")
	t.Logf("after the upgrade: exclusive-non-isolcpus lends %s", second.p.alloc.Layout().ExclusiveNonIsolcpus)
	// The container crashes; the kubelet creates it again with the same
	// CDI environment (the claim stays prepared).
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	_, _, err = f.createWithEnv(pod, "app", 10, env...)
	require.NoError(t, err, "the restarted container of a pod that ran before the upgrade is refused")
}
