package dra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// editClaimsFile rewrites the claims file through a generic JSON tree.
func editClaimsFile(t *testing.T, path string, edit func(claims map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(filepath.Clean(path))
	require.NoError(t, err)
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber() // numbers as written, not re-formatted as floats
	require.NoError(t, dec.Decode(&doc))
	edit(doc["claims"].(map[string]any))
	out, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, out, 0o600))
}

// One claim's damaged mark (or Prepare number, or CPU list) must not
// cost the other claims of the file. It did: the whole file was moved
// aside, the driver started with no claims, removed every claim's CDI
// spec, and a running container of an untouched claim was refused its
// token ("unknown claim token ... lost") and confined. A claim mark of
// null loaded before the marks were checked (as answered, for that
// claim only).
func TestOneClaimsDamagedMarkDoesNotLoseTheOtherClaims(t *testing.T) {
	for name, damage := range map[string]func(c map[string]any){
		"claim unanswered null": func(c map[string]any) { c["unanswered"] = nil },
		"request prepare null": func(c map[string]any) {
			c["requests"].(map[string]any)["cpus"].(map[string]any)["prepare"] = nil
		},
		"request cpus no list": func(c map[string]any) {
			c["requests"].(map[string]any)["cpus"].(map[string]any)["cpus"] = "24-x"
		},
	} {
		t.Run(name, func(t *testing.T) {
			td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
			good := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
			other := allocatedClaim("uid-2", "other", slots{"cpus": slotsOn(pools.Exclusive, 1, 4, 4)}, "pod-2")
			require.NoError(t, prepare(t, td.Driver, good)["uid-1"].Err)
			require.NoError(t, prepare(t, td.Driver, other)["uid-2"].Err)
			require.NoError(t, td.save())
			env := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]
			require.Len(t, env, 1)
			editClaimsFile(t, td.claims, func(claims map[string]any) { damage(claims["uid-2"].(map[string]any)) })

			d := td.restart(t)
			assert.Contains(t, d.Claims(), "uid-1", "an untouched claim is kept")
			_, _, err := d.Lookup(envWith(env), Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "c"})
			assert.NoError(t, err, "the untouched claim's running container keeps its token")
		})
	}
}

// Pretty-printed, case-variant and duplicate keys are read as the decoder
// reads them: a case-variant or last duplicate null is a bad mark (read
// as true and said), a last duplicate true is a good one (nothing said).
func TestMarksCheckReadsKeysAsTheDecoder(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(string) string
		good bool
	}{
		"indented": {func(s string) string {
			var b strings.Builder
			var v any
			_ = json.Unmarshal([]byte(s), &v)
			out, _ := json.MarshalIndent(v, "", "   ")
			b.Write(out)
			return b.String()
		}, true},
		"case-variant null": {func(s string) string {
			return strings.Replace(s, `"unanswered":true}}}`, `"UNANSWERED":null}}}`, 1)
		}, false},
		"duplicate, null last": {func(s string) string {
			return strings.Replace(s, `"unanswered":true}}}`, `"unanswered":true,"Unanswered":null}}}`, 1)
		}, false},
		"duplicate, true last": {func(s string) string {
			return strings.Replace(s, `"unanswered":true}}}`, `"unanswered":null,"unanswered":true}}}`, 1)
		}, true},
	} {
		t.Run(name, func(t *testing.T) {
			td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
			require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-1"].Err)
			data, err := os.ReadFile(filepath.Clean(td.claims))
			require.NoError(t, err)
			edited := c.edit(string(data))
			require.NotEqual(t, string(data), edited)
			require.NoError(t, os.WriteFile(td.claims, []byte(edited), 0o600))
			d, logged := td.restartLogged(t)
			require.Contains(t, d.Claims(), "uid-1")
			assert.True(t, d.Claims()["uid-1"].Requests["cpus"].Unanswered)
			if c.good {
				assert.NotContains(t, logged, "edited or damaged")
			} else {
				assert.Contains(t, logged, `claim uid-1 (ns/app): its "unanswered" is null`)
			}
		})
	}
}

// The warning of a bad mark says what was assumed and what to do, as
// docs/troubleshooting.md does, and doing it loses nothing. It said "set
// it to true ... in the file moved aside, and move it back before the
// daemon starts again": the daemon that refused the file ran on with no
// claims and wrote the claims it prepared since to the claims file, so
// moving the old file back replaced them, and the next start lost those
// claims (their running containers refused as "set by hand"), while the
// claims moved back had no CDI spec any more and shared CPUs with those
// prepared since. Now no file is moved aside: the claim is kept, read as
// unanswered, and the claims prepared since stay.
func TestFollowingTheBadMarkFixDoesNotLoseClaimsPreparedSince(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-1"].Err)
	env1 := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]
	data, err := os.ReadFile(filepath.Clean(td.claims))
	require.NoError(t, err)
	require.Contains(t, string(data), `"unanswered":true}}}`)
	require.NoError(t, os.WriteFile(td.claims, []byte(strings.Replace(string(data), `"unanswered":true}}}`, `"unanswered":"yes"}}}`, 1)), 0o600))

	d2, logged := td.restartLogged(t)
	assert.NotContains(t, logged, "move it back", "no file to move back")
	assert.Contains(t, logged, `its "unanswered" is "yes", not true or false`)
	assert.Contains(t, logged, "read as true", "what was assumed")
	assert.Contains(t, logged, "delete the pod (see docs/troubleshooting.md)", "what to do, as the docs say")
	aside, _ := filepath.Glob(td.claims + ".corrupt-*")
	assert.Empty(t, aside, "nothing moved aside")
	require.Contains(t, d2.Claims(), "uid-1", "the claim with the bad mark is kept")
	require.NoError(t, prepare(t, d2, allocatedClaim("uid-2", "other", slots{"cpus": slotsOn(pools.Exclusive, 1, 4, 4)}, "pod-2"))["uid-2"].Err)
	require.NoError(t, d2.Flush())
	env2 := cdiEnv(t, td.cdi, "uid-2")[CDIDeviceID("uid-2", "cpus")]

	d3 := td.restart(t)
	assert.Contains(t, d3.Claims(), "uid-1")
	assert.Contains(t, d3.Claims(), "uid-2", "the claim prepared since")
	_, _, err = d3.Lookup(envWith(env1), Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "c"})
	assert.NoError(t, err, "uid-1's running container")
	_, _, err = d3.Lookup(envWith(env2), Container{PodUID: "pod-2", Namespace: "ns", Pod: "other", Name: "c"})
	assert.NoError(t, err, "uid-2's running container")
}

// A "prepare" of 18446744073709551615 (any integer of 0 or more passed
// once) made the next Prepare that places a request anew number it
// max+1, which wraps to 0, the oldest: a container showing a kept
// request's old token then cleared the new request's mark, the defect the
// numbers were added to prevent. Numbers above 2^53 read as bad.
func TestAPrepareNumberAtTheLimitDoesNotWrapToTheOldest(t *testing.T) {
	s := static(t, "epyc-2s-384", epycConfig)
	p := &heldFrom{Static: s}
	td := newTestDriver(t, p)
	claim := claimAB()
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	require.NoError(t, td.save())
	first := td.Claims()["uid-1"]
	envA := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "a")]
	editClaimsFile(t, td.claims, func(claims map[string]any) {
		for _, r := range claims["uid-1"].(map[string]any)["requests"].(map[string]any) {
			r.(map[string]any)["prepare"] = json.Number("18446744073709551615")
		}
	})
	td.Driver = td.restart(t)
	require.Contains(t, td.Claims(), "uid-1", "loads")
	p.hold(first.Requests["b"].CPUSet())
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err, "prepared again")
	again := td.Claims()["uid-1"]
	require.NotEqual(t, first.Requests["b"].Token, again.Requests["b"].Token, "b placed anew")
	newB := again.Requests["b"].CPUSet()

	td.Driver = td.restart(t) // kill -9 before its last look
	bindShown(t, td.Driver, "a", envA)
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(td.Driver, newB),
		"b's new token was never known to reach the kubelet (its number wrapped to %d)", td.Claims()["uid-1"].Requests["b"].Prepare)
}

// A file of a newer schema (a downgrade) is refused for its version, not
// blamed on a hand edit or damage for a field that schema writes
// differently: a mark (which the marks' reading would warn about as
// damaged) or another field of another type (which the decoder would
// refuse with its own message, naming no schema). The version is read
// first.
func TestAFileOfANewerSchemaIsRefusedForItsSchemaNotAsDamaged(t *testing.T) {
	for name, change := range map[string]func(string) string{
		"mark written differently": func(s string) string {
			return strings.Replace(s, `"unanswered":true}}}`, `"unanswered":"since 2027-01-01T00:00:00Z"}}}`, 1)
		},
		"cpus written as a list": func(s string) string {
			return strings.Replace(s, `"cpus":"`, `"cpus":[0,1],"was":"`, 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
			require.NoError(t, prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))["uid-1"].Err)
			data, err := os.ReadFile(filepath.Clean(td.claims))
			require.NoError(t, err)
			newer := strings.Replace(string(data), `"version":1`, `"version":2`, 1)
			newer = change(newer)
			require.NotEqual(t, strings.Replace(string(data), `"version":1`, `"version":2`, 1), newer)
			require.NoError(t, os.WriteFile(td.claims, []byte(newer), 0o600))
			_, logged := td.restartLogged(t)
			assert.Contains(t, logged, "schema version 2")
			assert.NotContains(t, logged, "edited or damaged")
			assert.NotContains(t, logged, "cannot unmarshal")
		})
	}
}
