package dra

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/cpupool/nri-cpupool/pools"
)

// The kubelet gives up on a Prepare after its call timeout (its context
// ends; it then gets DeadlineExceeded, never the driver's answer, and
// retries). A Prepare that finishes after that was not answered: the
// unanswered mark must stay, in memory and so in the claims file the
// background writer writes next, so that a kill -9 before the kubelet's
// retry leaves the claim unconfirmed. PrepareResourceClaims ignores its
// context and clears the mark as if the kubelet had been answered.
func TestAPrepareTheKubeletGaveUpOnKeepsTheUnansweredMark(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the kubelet's call timed out while the driver worked
	out, err := td.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, out["uid-1"].Err)
	cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
	require.NoError(t, td.save(), "the background writer's next write")

	assert.True(t, readClaimsFile(t, td.claims)["uid-1"].Unanswered, "the kubelet never got the answer")
	d := td.restart(t)
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(d, cpus), "after a kill -9: unconfirmed")
}
