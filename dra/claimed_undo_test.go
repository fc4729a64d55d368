package dra

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/pools"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Prepare of [A allocated again elsewhere, B] whose claims file
// write fails takes both back (PrepareResourceClaims' undo, a map walked
// in random order). B was placed on A's old CPUs (free once A moved);
// undoing A before B puts A's old CPUs back into d.claimed, then undoing
// B takes them out again: d.claimed no longer holds the CPUs claim A has.
// PreparedOn's early exit trusts d.claimed and answers "no
// claim" for A's CPUs, so a device plugin grant's container is pinned on
// them; the next Prepare's exclude (d.claimed) offers them to another
// claim as well.
func TestClaimedStaysTheClaimsCPUsAfterAFailedWriteUndo(t *testing.T) {
	for i := range 20 {
		s := static(t, "epyc-2s-384", epycConfig)
		td := newTestDriver(t, s)
		require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-a"].Err)
		old := cpusOf(t, td.Driver, "uid-a", "cpus")

		replace := td.store.replace
		td.store.replace = func(string, []byte, bool) error { return errors.New("no space left on device") }
		res := prepare(t, td.Driver,
			allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 2, 0, 4)}, "pod-1"),
			allocatedClaim("uid-b", "b", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-2"))
		require.Error(t, res["uid-b"].Err)
		require.Equal(t, old, cpusOf(t, td.Driver, "uid-a", "cpus"), "A is back on its CPUs")

		claim, on, _ := td.PreparedOn(old, false)
		assert.Equal(t, "ns/a/cpus", claim, "round %d: PreparedOn(%s) (claim A's CPUs) answered %q on %q", i, old, claim, on)
		// And the next claim is placed on A's CPUs too.
		td.store.replace = replace
		require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-c", "c", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-3"))["uid-c"].Err)
		require.True(t, cpusOf(t, td.Driver, "uid-c", "cpus").Intersection(old).IsEmpty(), "round %d: claims A and C share CPUs", i)
	}
}

// Claims never share a CPU; a claims file where two do (written by hand,
// or by a defect) is said loudly at start, naming both, rather than
// trusted in silence: each claim's container would be pinned on CPUs the
// other's has.
func TestClaimsSharingCPUsInTheFileAreLoggedAtStart(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	td := newTestDriver(t, s)
	require.NoError(t, prepare(t, td.Driver,
		allocatedClaim("uid-a", "a", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"),
		allocatedClaim("uid-b", "b", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-2"))["uid-b"].Err)
	a := cpusOf(t, td.Driver, "uid-a", "cpus")

	data, err := os.ReadFile(td.claims)
	require.NoError(t, err)
	var file map[string]any
	require.NoError(t, json.Unmarshal(data, &file))
	b := file["claims"].(map[string]any)["uid-b"].(map[string]any)["requests"].(map[string]any)["cpus"].(map[string]any)
	b["cpus"] = a.String()
	data, err = json.Marshal(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(td.claims, data, 0o600))

	var logged bytes.Buffer
	l := logrus.New()
	l.SetOutput(&logged)
	d, err := New(s, Options{NodeName: testNode, ClaimsFile: td.claims, CDIDir: td.cdi, Log: l})
	require.NoError(t, err)
	_ = d
	assert.Contains(t, logged.String(), "DRA claims file: claims ns/a and ns/b (uid-a, uid-b) share CPUs "+a.String())
}
