package dra

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/cpupool/nri-cpupool/pools"
)

// boundThenLostUnprepare prepares claim (reserved for pod-1) on td, binds
// pod-1's container app to its request "cpus", checks that preparing it
// again for the same pod keeps that binding, then unprepares it with a
// claims-file write that fails and restarts the driver: the kill -9 after
// the kubelet was told the Unprepare was done. It returns the restarted
// driver, which still remembers the claim bound to pod-1/app.
func boundThenLostUnprepare(t *testing.T, td *testDriver, claim *resourceapi.ResourceClaim) *Driver {
	t.Helper()
	uid := string(claim.UID)
	require.NoError(t, prepare(t, td.Driver, claim)[claim.UID].Err)
	env := cdiEnv(t, td.cdi, uid)[CDIDeviceID(uid, "cpus")]
	_, ok, err := td.Bind(envWith(env), Container{PodUID: "pod-1", Namespace: "ns", Pod: "p1", Name: "app"})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, prepare(t, td.Driver, claim)[claim.UID].Err) // a kubelet restart prepares it again
	require.Equal(t, "pod-1", td.Claims()[uid].Requests["cpus"].PodUID, "prepared again for the same pod, the request stays its container's")
	require.NoError(t, td.save())

	td.store.replace = func(string, []byte, bool) error { return errors.New("disk full") }
	res, err := td.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: claim.UID, NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}}})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID])
	td.store.replace = nil
	d := td.restart(t)
	require.Len(t, d.Claims(), 1)
	require.Equal(t, "pod-1", d.Claims()[uid].Requests["cpus"].PodUID, "the restart remembers the binding the lost write would have removed")
	return d
}

// TestReprepareForANewPodDropsTheEndedPodsBinding: a resourceClaimName
// claim outlives its pods. Its Unprepare (pod-1 ended) told the kubelet
// success but the write was lost to a kill -9; by the restart the claim is
// already reserved for the next pod, pod-2, on this node, with the same
// allocation. ForgetStale keeps it (reserved, allocated here) and the
// kubelet prepares it for pod-2. The request keeps its CPUs and token, but
// not its binding to pod-1's container: kept, it would refuse pod-2's
// container for as long as the claim stays allocated.
func TestReprepareForANewPodDropsTheEndedPodsBinding(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	on := slotsOn(pools.Exclusive, 1, 0, 2)
	d := boundThenLostUnprepare(t, td, allocatedClaim("uid-1", "shared", slots{"cpus": on}, "pod-1"))
	was := *d.Claims()["uid-1"].Requests["cpus"]

	now := allocatedClaim("uid-1", "shared", slots{"cpus": on}, "pod-2")
	d.ForgetStale(context.Background(), fake.NewClientset(now))
	require.NoError(t, prepare(t, d, now)["uid-1"].Err)
	r := d.Claims()["uid-1"].Requests["cpus"]
	assert.Equal(t, was.CPUs, r.CPUs, "same allocation: the request keeps its CPUs")
	assert.Equal(t, was.Token, r.Token, "and its token")
	env := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]
	_, _, err := d.Lookup(envWith(env), Container{PodUID: "pod-1", Namespace: "ns", Pod: "p1", Name: "app"})
	require.Error(t, err, "pod-1, no longer among the claim's pods, gets nothing")
	_, _, err = d.Bind(envWith(env), Container{PodUID: "pod-2", Namespace: "ns", Pod: "p2", Name: "app"})
	require.NoError(t, err, "pod-2, the pod the claim is reserved for now, is refused its claim")
	assert.Equal(t, "pod-2", d.Claims()["uid-1"].Requests["cpus"].PodUID)
}

// TestReprepareForANewPodUnbindsTheClaimsMemory: the same, for the
// memory the claim reserves. The restart counted the reservation bound to
// pod-1's container (from the claims file); prepared for pod-2, it is
// bound to none again, whole for pod-2's container, which takes from it
// once it shows the token.
func TestReprepareForANewPodUnbindsTheClaimsMemory(t *testing.T) {
	s := hugeXeon(t, 0, xeonConfig)
	td := newTestDriver(t, s)
	d := boundThenLostUnprepare(t, td, hugePagesClaim("uid-1", 1, 2, 16, "pod-1"))
	res := s.Allocator().ClaimReservations()["uid-1/cpus"]
	require.Equal(t, "pod-1/app", res.PodUID+"/"+res.Container, "the restart counts the reservation bound as the claims file says")

	require.NoError(t, prepare(t, d, hugePagesClaim("uid-1", 1, 2, 16, "pod-2"))["uid-1"].Err)
	res = s.Allocator().ClaimReservations()["uid-1/cpus"]
	assert.Equal(t, "/", res.PodUID+"/"+res.Container, "the reservation is still bound to pod-1's container, which the claim is no longer reserved for")
	assert.Len(t, res.Held, 1, "the reservation stays")
}

// TestUnbindingIsNotLoggedForAPrepareWhoseClaimsWriteFails: prepare logged
// "no longer bound to container ..." while deciding, before the claims
// file was written. A write that fails undoes the record (the binding is
// back), yet every kubelet retry logged the unbinding again.
// Now it is said once, by the Prepare that writes it.
func TestUnbindingIsNotLoggedForAPrepareWhoseClaimsWriteFails(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	on := slotsOn(pools.Exclusive, 1, 0, 2)
	d := boundThenLostUnprepare(t, td, allocatedClaim("uid-1", "shared", slots{"cpus": on}, "pod-1"))
	now := allocatedClaim("uid-1", "shared", slots{"cpus": on}, "pod-2")
	var logged bytes.Buffer
	d.log.SetOutput(&logged)
	replace := d.store.replace
	d.store.replace = func(string, []byte, bool) error { return errors.New("no space left on device") }
	for range 3 {
		require.Error(t, prepare(t, d, now)["uid-1"].Err)
	}
	require.Equal(t, "pod-1", d.Claims()["uid-1"].Requests["cpus"].PodUID, "the failed write undid the unbinding")
	assert.NotContains(t, logged.String(), "no longer bound",
		"three failed Prepares must not log an unbinding that was undone:\n%s", logged.String())

	d.store.replace = replace
	require.NoError(t, prepare(t, d, now)["uid-1"].Err)
	assert.Empty(t, d.Claims()["uid-1"].Requests["cpus"].PodUID)
	assert.Equal(t, 1, strings.Count(logged.String(), "no longer bound to container app of pod pod-1"),
		"said once, by the Prepare whose write worked:\n%s", logged.String())
}
