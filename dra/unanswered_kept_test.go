package dra

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/cpupool/nri-cpupool/pools"
)

// claimAB is a claim of two requests, "a" and "b", for pod-1.
func claimAB() *resourceapi.ResourceClaim {
	return allocatedClaim("uid-1", "app", slots{
		"a": slotsOn(pools.Exclusive, 1, 0, 2),
		"b": slotsOn(pools.Exclusive, 1, 2, 2),
	}, "pod-1")
}

// bindShown binds a container of pod-1 that shows the tokens of env.
func bindShown(t *testing.T, d *Driver, name string, env []string) {
	t.Helper()
	_, ok, err := d.Bind(envWith(env), Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: name})
	require.NoError(t, err)
	require.True(t, ok)
}

// An answered claim is prepared again (after a reboot, say) keeping
// request a, with its token, and placing b anew, with a new token (its
// CPUs no longer fit, or a running container holds them); kill -9 before
// that call's last look, so the file marks the claim unanswered. A's
// container, which shows a's token of the first, answered Prepare, binds
// after the restart. That proves nothing of the second Prepare: the
// kubelet may never have got b's new token. b's request, which no
// container is bound to, stays unconfirmed, and a running container on
// its CPUs is not refused for it. Before, any binding cleared the claim's
// one mark, and b beat a running container although it was never
// answered. A container showing b's new token then confirms b.
func TestABindingOfAKeptRequestsOldTokenLeavesARequestPlacedAnewUnanswered(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	claim := claimAB()
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	require.NoError(t, td.save(), "answered: the mark is cleared in the file")
	first := td.Claims()["uid-1"]
	envA := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "a")]
	p.hold(first.Requests["b"].CPUSet()) // b no longer stands where it was

	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err, "prepared again")
	again := td.Claims()["uid-1"]
	require.Equal(t, first.Requests["a"].Token, again.Requests["a"].Token, "a kept")
	require.NotEqual(t, first.Requests["b"].Token, again.Requests["b"].Token, "b placed anew")
	newB := again.Requests["b"].CPUSet()
	envB := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "b")]

	// kill -9 before the second call's last look: the file is as written
	// before it.
	td.Driver = td.restart(t)
	bindShown(t, td.Driver, "a", envA)
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(td.Driver, newB),
		"b's new token was never known to reach the kubelet: a's old token proves nothing of it")
	require.NoError(t, td.Flush(), "the way out's last write")
	td.Driver = td.restart(t)
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(td.Driver, newB), "also after the next quiet restart")

	bindShown(t, td.Driver, "b", envB)
	assert.Equal(t, preparedOn{"ns/app/b", newB.String(), false}, askPreparedOnRunning(td.Driver, newB), "bound: b's container")
}

// The other way round: a claim marked unanswered (kill -9 before the
// write that clears it) is prepared again after the restart keeping a,
// still marked, and placing b anew; kill -9 again before that call's last
// look. A container showing b's new token proves that a Prepare with b's
// token, the latest, reached the kubelet, and it carried a's token too: a,
// which no container is bound to, is answered and beats a running
// container on its CPUs, as the whole claim's mark did before.
func TestABindingOfATokenOfTheLatestPrepareAnswersTheRequestsItKept(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	claim := claimAB()
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	first := td.Claims()["uid-1"]
	td.Driver = td.restart(t) // kill -9: still marked
	p.hold(first.Requests["b"].CPUSet())
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err, "prepared again")
	again := td.Claims()["uid-1"]
	require.Equal(t, first.Requests["a"].Token, again.Requests["a"].Token, "a kept")
	require.NotEqual(t, first.Requests["b"].Token, again.Requests["b"].Token, "b placed anew")
	a := again.Requests["a"].CPUSet()
	envB := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "b")]

	td.Driver = td.restart(t) // kill -9 before its last look
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(td.Driver, a), "unconfirmed")
	bindShown(t, td.Driver, "b", envB)
	assert.Equal(t, preparedOn{"ns/app/a", a.String(), false}, askPreparedOnRunning(td.Driver, a),
		"the latest Prepare reached the kubelet, a's token with it")
}

// A claims file of the release before marks the claim only, not its
// requests: its mark stands for every request, which load as unconfirmed,
// and a container showing any of their tokens answers them all, as that
// release read it (their Prepare numbers are all 0, as old as any). The
// claim's mark, which that release reads, is written while a request is
// marked, and cleared with the last.
func TestAClaimsFileOfTheReleaseBeforeMarksEveryRequestOfAMarkedClaim(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	require.NoError(t, prepare(t, td.Driver, claimAB())["uid-1"].Err)
	first := td.Claims()["uid-1"]
	envA := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "a")]
	data, err := os.ReadFile(filepath.Clean(td.claims))
	require.NoError(t, err)
	old := strings.ReplaceAll(string(data), `,"unanswered":true,"prepare":1}`, `}`)
	require.Equal(t, 2, strings.Count(string(data), `"unanswered":true,"prepare":1`), "both requests marked")
	require.Contains(t, old, `"unanswered":true}}}`, "the claim's mark")
	require.NoError(t, os.WriteFile(td.claims, []byte(old), 0o600))

	td.Driver = td.restart(t)
	a, b := first.Requests["a"].CPUSet(), first.Requests["b"].CPUSet()
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(td.Driver, a), "a unconfirmed")
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(td.Driver, b), "b unconfirmed")

	bindShown(t, td.Driver, "a", envA)
	assert.Equal(t, preparedOn{"ns/app/b", b.String(), false}, askPreparedOnRunning(td.Driver, b), "answered with a, as that release read it")
	require.NoError(t, td.Flush())
	assert.False(t, readClaimsFile(t, td.claims)["uid-1"].Unanswered, "no request marked: nor is the claim")
}
