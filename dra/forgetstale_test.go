package dra

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/cpupool/nri-cpupool/pools"
)

// The check of stale claims at start forgets, besides the claims the API
// server no longer has, those it still has but no pod on this node can
// use: deallocated, reserved for no pod, or allocated from another node's
// pool. A resourceClaimName claim outlives its pods, so an Unprepare whose
// write was lost to a kill -9 (the kubelet was told it was done, and does
// not ask again) would otherwise keep its CPUs claimed for good while the
// scheduler offers them again. A claim allocated here and reserved for a
// pod is kept.
func TestForgetStaleForgetsClaimsNoPodCanUse(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	on := func(first int) []string { return slotsOn(pools.Exclusive, 1, first, 2) }
	prepare(t, td.Driver,
		allocatedClaim("uid-1", "shared", slots{"cpus": on(0)}, "pod-1"),
		allocatedClaim("uid-2", "unreserved", slots{"cpus": on(2)}, "pod-2"),
		allocatedClaim("uid-3", "elsewhere", slots{"cpus": on(4)}, "pod-3"),
		allocatedClaim("uid-4", "live", slots{"cpus": on(6)}, "pod-4"))

	// Unprepared, but its write is lost: kill -9 before the retry lands.
	td.store.replace = func(string, []byte, bool) error { return errors.New("disk full") }
	res, err := td.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "uid-1", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "shared"}}})
	require.NoError(t, err)
	require.NoError(t, res["uid-1"], "the kubelet is told it is unprepared")
	td.store.replace = nil
	d := td.restart(t)
	require.Len(t, d.Claims(), 4, "the restarted driver remembers every claim")

	// The claim objects as the API server has them now.
	deallocated := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared", UID: "uid-1"}}
	unreserved := allocatedClaim("uid-2", "unreserved", slots{"cpus": on(2)})
	elsewhere := allocatedClaim("uid-3", "elsewhere", slots{"cpus": on(4)}, "pod-3")
	for i := range elsewhere.Status.Allocation.Devices.Results {
		elsewhere.Status.Allocation.Devices.Results[i].Pool = "node-b"
	}
	live := allocatedClaim("uid-4", "live", slots{"cpus": on(6)}, "pod-4")
	d.ForgetStale(context.Background(), fake.NewClientset(deallocated, unreserved, elsewhere, live))
	assert.Equal(t, []string{"uid-4"}, keys(d.Claims()), "only the claim a pod of this node can use is kept")
	assert.Equal(t, []string{"uid-4"}, keys(td.restart(t).Claims()), "and the file says so")
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// A claim the kubelet prepares again while its check waits for the API
// server is not forgotten, whatever the check then says: it is recorded
// anew, and the kubelet will unprepare it.
func TestForgetStaleKeepsAClaimPreparedMeanwhile(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "shared", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-1")
	prepare(t, td.Driver, claim)
	d := td.restart(t)

	asked, answer := make(chan struct{}), make(chan struct{})
	client := fake.NewClientset()
	client.PrependReactor("get", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		close(asked)
		<-answer
		// Deallocated, as it was when the check began.
		return true, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared", UID: "uid-1"}}, nil
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.ForgetStale(context.Background(), client)
	}()
	<-asked
	require.NoError(t, prepare(t, d, claim)["uid-1"].Err, "prepared again while the check waits")
	close(answer)
	<-done
	assert.Contains(t, d.Claims(), "uid-1")
}

// Serve checks the remembered claims against the API server in the
// background: an API server that accepts the connection and does not
// answer (overloaded while every node's daemon restarts) does not keep
// the driver from the kubelet, whose Unprepare needs no API server. Each
// check gives up after its timeout, and a claim it could not check is
// kept.
func TestServesTheKubeletWhileTheAPIServerHangs(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	td.retry = retry{initial: time.Millisecond, max: 20 * time.Millisecond}
	prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))
	td.Driver = td.restart(t)     // a restart that remembers it
	td.staleTimeout = time.Minute // beyond the wait below: the check must not be in the way

	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)

	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet")
	paths := Paths{PluginDir: filepath.Join(kubelet, "plugins", DriverName), RegistryDir: filepath.Join(kubelet, "plugins_registry")}
	require.NoError(t, os.MkdirAll(paths.RegistryDir, 0o750))
	serving(t, td, connected(client), paths)
	deadline := time.Now().Add(10 * time.Second) // not a threshold: serving takes milliseconds, or never
	for time.Now().Before(deadline) && td.Status().State != StateServing {
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, StateServing, td.Status().State, "10 s after Serve began the driver does not serve the kubelet: it waits for an API server that does not answer")

	// The check itself gives up on a claim whose Get does not answer (a
	// driver of its own: the one serving checks in the background).
	d := td.restart(t)
	d.staleTimeout = 50 * time.Millisecond
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		d.ForgetStale(context.Background(), client)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("ForgetStale waits for an API server that does not answer")
	}
	assert.Contains(t, d.Claims(), "uid-1", "a claim that could not be checked is kept")
}
