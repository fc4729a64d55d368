package plugin

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestDRAReprepareForANewPodUnbindsTheClaimsMemory: a resourceClaimName
// claim with hugepages, used by pod-1's container, whose pod ended and
// whose Unprepare never reached the claims file (a kill -9): the restart
// counts its reservation bound to pod-1's container, in the allocator and
// in the plugin's copy. The kubelet prepares it for the next pod, pod-2,
// with the same allocation: the request is kept, its binding to pod-1 is
// not, and the reservation is bound to none again, in both, until pod-2's
// container takes it (and then stays that container's).
func TestDRAReprepareForANewPodUnbindsTheClaimsMemory(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRAOn(t, f, vmHugePagesDRA)
	pod1 := f.runPod(podSpec{name: "one", namespace: "telco", qos: "besteffort"})
	env, err := n.prepareHugePages(t, "uid-a", 1, 1, 16, pod1)
	require.NoError(t, err)
	withHugePages(f, 16)
	ctr, _, err := f.createWithEnv(pod1, "fwd", 10, env...)
	require.NoError(t, err)
	// Prepared again for the same pod (a kubelet restart), the request
	// stays bound, and the claims file, written by the Prepare, says so.
	_, err = n.prepareHugePages(t, "uid-a", 1, 1, 16, pod1)
	require.NoError(t, err)
	require.Equal(t, pod1.Uid, n.driver.Claims()["uid-a"].Requests["cpus"].PodUID)
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	f.removePod(pod1)
	require.NoError(t, n.p.Flush())
	n.kill()

	n = startDRAOn(t, f, vmHugePagesDRA)
	owners := func() (string, string) {
		n.p.mu.Lock()
		defer n.p.mu.Unlock()
		res, kept := n.p.alloc.ClaimReservations()["uid-a/cpus"], n.p.claimMemory["uid-a/cpus"]
		return res.PodUID + "/" + res.Container, kept.PodUID + "/" + kept.Container
	}
	res, kept := owners()
	require.Equal(t, pod1.Uid+"/fwd", res, "the restart counts the reservation bound, as the claims file says")
	require.Equal(t, pod1.Uid+"/fwd", kept)

	pod2 := f.runPod(podSpec{name: "two", namespace: "telco", qos: "besteffort"})
	claim := n.claim("uid-a", 1, 1, pod2)
	claim.Status.Allocation.Devices.Results[0].ConsumedCapacity["cpupool.dev/hugepages2Mi"] = *resource.NewQuantity(16<<21, resource.BinarySI)
	out, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, out[claim.UID].Err)
	res, kept = owners()
	assert.Equal(t, "/", res, "the allocator's reservation is still pod-1's container's, a pod the claim is no longer reserved for")
	assert.Equal(t, "/", kept, "the plugin's copy, which every new allocator counts again, is still pod-1's container's")

	_, _, err = f.createWithEnv(pod2, "app", 10, n.cdiEnv(t, "uid-a")...)
	require.NoError(t, err, "pod-2's container gets the claim")
	res, kept = owners()
	assert.Equal(t, pod2.Uid+"/app", res)
	assert.Equal(t, pod2.Uid+"/app", kept)
	assert.Equal(t, pagesOn1(16, 1), n.memoryUse(), "the claim's pages, counted once")
	n.p.UnbindMemory("uid-a/cpus", pod1.Uid, "fwd") // an unbinding of the old owner leaves the new one's
	res, kept = owners()
	assert.Equal(t, pod2.Uid+"/app", res)
	assert.Equal(t, pod2.Uid+"/app", kept)
}
