package dra

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// A claim restarted with the unanswered mark (a kill -9 after the kubelet
// was answered, before the write that clears the mark) whose container
// then shows its token and binds was answered for sure: only an answered
// Prepare gives the kubelet the CDI device that injects the token. The
// kubelet never prepares it again, so nothing else clears the mark: the
// next QUIET restart (Flush on the way out, no kill -9) must not find the
// claim unanswered, else its requests no container bound yet (here "b")
// do not beat a running container on their CPUs at every later restart.
func TestABoundClaimIsNotUnansweredAfterTheNextQuietRestart(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{
		"a": slotsOn(pools.Exclusive, 1, 0, 2),
		"b": slotsOn(pools.Exclusive, 1, 2, 2),
	}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	b := cpusOf(t, td.Driver, "uid-1", "b")
	env := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "a")]

	// kill -9 before the background write: the file keeps the mark.
	td.Driver = td.restart(t)
	_, ok, err := td.Bind(envWith(env), Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "c"})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, preparedOn{"ns/app/b", b.String(), false}, askPreparedOnRunning(td.Driver, b),
		"answered, known so at the binding: the claim's unbound request beats a running container already")
	require.NoError(t, td.Flush(), "the way out's last write")

	// A quiet restart.
	td.Driver = td.restart(t)
	assert.False(t, readClaimsFile(t, td.claims)["uid-1"].Unanswered, "the claim's container showed its token: it was answered")
	assert.Equal(t, preparedOn{"ns/app/b", b.String(), false}, askPreparedOnRunning(td.Driver, b),
		"an answered claim's unbound request beats a running container")
}
