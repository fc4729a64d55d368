package dra

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// The claims file's write before the kubelet call is answered marks the
// claim unanswered, and the next write after the answer (the background
// writer's, coalesced) clears the mark. Restarted with the mark (a kill -9
// before that write), the claim is unconfirmed: a running container on
// its CPUs is not refused for it. Restarted without (a quiet restart), it
// was answered, and the kubelet never prepares it again: its CPUs stay
// its own, also against a running container.
func TestAClaimIsUnconfirmedAfterARestartOnlyWhileTheFileMarksItUnanswered(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
	prepared := preparedOn{"ns/app/cpus", cpus.String(), false}
	assert.True(t, readClaimsFile(t, td.claims)["uid-1"].Unanswered, "the write before the answer marks it")
	assert.False(t, td.Claims()["uid-1"].Unanswered, "answered in memory")

	marked := td.restart(t)
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(marked, cpus), "marked: unconfirmed")
	assert.Equal(t, prepared, askPreparedOn(marked, cpus), "a container being created is refused them")

	require.NoError(t, td.save(), "the background writer's next write")
	assert.False(t, readClaimsFile(t, td.claims)["uid-1"].Unanswered, "the mark is cleared")
	answered := td.restart(t)
	assert.Equal(t, prepared, askPreparedOnRunning(answered, cpus), "answered: its CPUs are its own")
	assert.Equal(t, prepared, askPreparedOn(answered, cpus))
}

// A claims file of an older release has no unanswered mark: its claims
// were answered (a Prepare whose write failed, or whose last look took
// its claims back, left them out), so they load as answered.
func TestAClaimsFileWithoutTheUnansweredMarkLoadsAnswered(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	r := td.Claims()["uid-1"].Requests["cpus"]
	slots, err := json.Marshal(r.Slots)
	require.NoError(t, err)
	old := fmt.Sprintf(`{"version":1,"claims":{"uid-1":{"namespace":"ns","name":"app","pods":["pod-1"],"requests":{"cpus":{"pool":%q,"slots":%s,"cpus":%q,"token":%q}}}}}`,
		r.Pool, slots, r.CPUs, r.Token)
	require.NoError(t, os.WriteFile(td.claims, []byte(old), 0o600))

	d := td.restart(t)
	require.Equal(t, r.CPUs, d.Claims()["uid-1"].Requests["cpus"].CPUs, "loaded")
	prepared := preparedOn{"ns/app/cpus", r.CPUs, false}
	assert.Equal(t, prepared, askPreparedOnRunning(d, r.CPUSet()), "answered: its CPUs are its own, also against a running container")
	assert.Equal(t, prepared, askPreparedOn(d, r.CPUSet()))
}

func readClaimsFile(t *testing.T, path string) map[string]*Claim {
	t.Helper()
	data, err := os.ReadFile(filepath.Clean(path))
	require.NoError(t, err)
	var doc claimsDoc
	require.NoError(t, json.Unmarshal(data, &doc))
	return doc.Claims
}
