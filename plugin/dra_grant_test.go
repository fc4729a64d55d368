package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/cpuset"
)

// A node moved from the device plugin to the DRA driver (docs/dra.md: "a
// node moves from one route to the other without changing pods") keeps
// its grants file, which is loaded whatever the config. The kubelet
// re-creates a pod of its checkpoint (after a reboot) with the grant token
// it checkpointed, while the driver has prepared a claim, whose container
// has not started yet, on the grant's CPUs: the driver places claims over
// what no container holds, and a grant of an absent pod holds nothing.

// keptGrantToken writes the grants file of the device plugin era before
// the daemon starts: a grant of pod telco/old's container app on cpus,
// its pod absent (kept at Synchronize, as after a reboot).
func keptGrantToken(t *testing.T, f *fakeRuntime, cpus string) string {
	t.Helper()
	tok := strings.Repeat("ab", 16)
	data, err := json.Marshal(map[string]grant{tok: {CPUs: cpus, Seq: 1, PodUID: "uid-old", Namespace: "telco", Pod: "old", Container: "app"}})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(statePath(f)), 0o755))
	require.NoError(t, os.WriteFile(GrantsFile(statePath(f)), data, 0o600))
	return tok
}

// The grant's container is refused, saying the CPUs are the claim's and
// what to do, rather than pinned on them; the claim's container then gets
// its CPUs. Before, the grant's container ran on the claim's CPUs and the
// claim's container was refused, blamed on the grant's "ending" pod. Once
// the claim's container runs (its request bound), the grant's container
// is still told about the claim, not about an ending pod.
func TestDRAKeptGrantDoesNotTakeAPreparedClaimsCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	const claimCPUs = "3,5,43,45" // claim uid-1's, as TestDRAClaimPinsItsContainer places it
	tok := keptGrantToken(t, f, claimCPUs)
	n := startDRA(t, f)
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	env := n.prepare(t, "uid-1", 1, 4, claimPod)
	require.Equal(t, claimCPUs, n.claimCPUs(t, "uid-1"), "the claim is prepared on the kept grant's CPUs")

	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	require.Equal(t, "uid-old", old.Uid)
	_, _, err := f.createWithEnv(old, "app", 10, EnvGrant+"="+tok)
	require.Error(t, err, "a grant container must not be pinned on CPUs prepared for a claim")
	assert.Contains(t, err.Error(), "container telco/old/app: "+EnvGrant+": CPUs 3,5,43,45 are prepared for DRA claim telco/claim-uid-1/cpus; "+
		"this pod was allocated by the device plugin before the node moved to DRA: delete the pod")

	_, resp, err := f.createWithEnv(claimPod, "fwd", 10, env...)
	require.NoError(t, err, "the claim's container gets its prepared CPUs")
	assert.Equal(t, claimCPUs, resp.Adjust.Linux.Resources.Cpu.Cpus)

	_, _, err = f.createWithEnv(old, "app", 10, EnvGrant+"="+tok)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "are prepared for DRA claim telco/claim-uid-1/cpus")
	assert.NotContains(t, err.Error(), "ending")
}

// A grant whose CPUs only partly are a claim's is refused too, naming
// those; with the claim unprepared its container is placed.
func TestDRAKeptGrantIsPlacedOnceTheClaimIsUnprepared(t *testing.T) {
	f := newFakeRuntime(t, false)
	tok := keptGrantToken(t, f, "5,7")
	n := startDRA(t, f)
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	n.prepare(t, "uid-1", 1, 4, claimPod)
	require.Equal(t, "3,5,43,45", n.claimCPUs(t, "uid-1"))

	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	_, _, err := f.createWithEnv(old, "app", 10, EnvGrant+"="+tok)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CPU 5 is prepared for DRA claim telco/claim-uid-1/cpus")

	res, err := n.driver.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: types.UID("uid-1")}})
	require.NoError(t, err)
	require.NoError(t, res["uid-1"])
	_, resp, err := f.createWithEnv(old, "app", 10, EnvGrant+"="+tok)
	require.NoError(t, err, "no claim has its CPUs any more")
	assert.Equal(t, "5,7", resp.Adjust.Linux.Resources.Cpu.Cpus)
}

// The device plugin's Allocate (Grant) with the driver on refuses a
// prepared claim's CPUs too (the config refuses both routes on one node;
// this is a plugin wired by hand).
func TestDRAGrantRefusesAPreparedClaimsCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRA(t, f)
	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	n.prepare(t, "uid-1", 1, 4, claimPod)
	require.Equal(t, "3,5,43,45", n.claimCPUs(t, "uid-1"))

	_, err := n.p.Grant([]string{"3", "7"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CPU 3 is prepared for DRA claim telco/claim-uid-1/cpus")
	env, err := n.p.Grant([]string{"7", "9"})
	require.NoError(t, err, "CPUs no claim has")
	assert.NotEmpty(t, env[EnvGrant])
}

// The reverse: a claim is never prepared on CPUs a grant's container
// holds. The driver offers only CPUs no container holds, and places the
// claim over them; a claim asking for more than is left on the node is
// refused.
func TestDRAClaimIsNotPreparedOnAGrantContainersCPUs(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRA(t, f)
	slots := slotsOn(n.driver, 1)
	env, err := n.p.Grant([]string{"3", "5", "43", "45"})
	require.NoError(t, err)
	old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
	_, resp, err := f.createWithEnv(old, "app", 10, EnvGrant+"="+env[EnvGrant])
	require.NoError(t, err)
	require.Equal(t, "3,5,43,45", resp.Adjust.Linux.Resources.Cpu.Cpus)
	assert.Equal(t, slots-4, slotsOn(n.driver, 1), "the grant container's CPUs leave the offer")

	claimPod := f.runPod(podSpec{name: "dpdk", namespace: "telco", qos: "besteffort"})
	claim := n.claim("uid-big", 1, slots, claimPod)
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.Error(t, res[claim.UID].Err, "a claim for every exclusive CPU of node 1 while a grant container holds 4 of them")
	assert.Contains(t, res[claim.UID].Err.Error(), `containers "3,5,43,45"`, "the refusal names the CPUs containers hold")

	n.prepare(t, "uid-1", 1, slots-4, claimPod)
	got, err := cpuset.Parse(n.claimCPUs(t, "uid-1"))
	require.NoError(t, err)
	assert.True(t, got.Intersection(cpuset.New(3, 5, 43, 45)).IsEmpty(), "the claim has none of the grant container's CPUs: %s", got)
}

// A container that shows a device plugin grant token and a claim token
// both is refused for that, naming the claims it shows: it gets its
// exclusive CPUs one way. Before, when the grant's CPUs were (some of) a
// prepared claim's, it was told instead that its pod was allocated by the
// device plugin before the node moved to DRA and should be deleted, which
// is not what happened: the claim it shows is its own.
func TestDRAContainerShowingAGrantAndAClaimIsToldSo(t *testing.T) {
	for _, tc := range []struct{ name, grantCPUs string }{
		{"grant on the claim's CPUs", "3,5,43,45"},
		{"grant on other CPUs", "7,9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRuntime(t, false)
			tok := keptGrantToken(t, f, tc.grantCPUs)
			n := startDRA(t, f)
			old := f.runPod(podSpec{name: "old", namespace: "telco", qos: "besteffort"})
			env := n.prepare(t, "uid-1", 1, 4, old)
			require.Equal(t, "3,5,43,45", n.claimCPUs(t, "uid-1"))

			_, _, err := f.createWithEnv(old, "app", 10, append(env, EnvGrant+"="+tok)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "container telco/old/app: the container shows both a "+EnvGrant+" grant and ResourceClaims ([telco/claim-uid-1/cpus]); it gets its exclusive CPUs one way")
			assert.NotContains(t, err.Error(), "before the node moved to DRA")

			_, resp, err := f.createWithEnv(old, "app", 10, env...)
			require.NoError(t, err, "with the claim's token only, the container gets the claim's CPUs")
			assert.Equal(t, "3,5,43,45", resp.Adjust.Linux.Resources.Cpu.Cpus)
		})
	}
}
