package dra

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// restartLogged is a new driver process over the same files, with what it
// logs.
func (td *testDriver) restartLogged(t *testing.T) (*Driver, string) {
	t.Helper()
	var logged bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logged)
	log.SetFormatter(&logrus.TextFormatter{DisableQuote: true})
	d, err := New(td.pools, Options{NodeName: testNode, Model: td.model, ClaimsFile: td.claims, CDIDir: td.cdi, Log: log})
	require.NoError(t, err)
	return d, logged.String()
}

// The claims file's unanswered mark is true or false (absent: false). A
// mark of another JSON type is a file edited by hand or damaged: it reads
// as true, the safe side, for that claim alone (the file is kept, not
// moved aside), and the log names the file, the claim, the field and its
// value, what it was read as and what to do. Before, a mark of null loaded
// silently as answered (json leaves a bool alone for null), the unsafe
// side: its claim's CPUs then beat a running container whose Prepare the
// kubelet may never have been answered; the others cost the whole file,
// with json's message, which names no claim.
func TestAClaimsFileWithABadUnansweredMarkReadsItAsUnansweredNamingTheClaimAndTheField(t *testing.T) {
	for _, bad := range []string{`"yes"`, `"true"`, `1`, `0`, `null`, `{}`, `[true]`} {
		t.Run(bad, func(t *testing.T) {
			td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
			claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
			require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
			cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
			data, err := os.ReadFile(filepath.Clean(td.claims))
			require.NoError(t, err)
			require.Contains(t, string(data), `"unanswered":true}}}`, "the claim's mark, written before the answer")
			// The release before's file: the claim's mark only.
			before := strings.Replace(string(data), `,"unanswered":true,"prepare":1}`, `}`, 1)
			require.NotEqual(t, string(data), before)
			require.NoError(t, os.WriteFile(td.claims, []byte(strings.Replace(before, `"unanswered":true}}}`, `"unanswered":`+bad+`}}}`, 1)), 0o600))

			d, logged := td.restartLogged(t)
			require.Contains(t, d.Claims(), "uid-1", "kept")
			assert.True(t, d.Claims()["uid-1"].Requests["cpus"].Unanswered, "read as unanswered, the safe side")
			assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(d, cpus), "held unconfirmed")
			aside, _ := filepath.Glob(td.claims + ".corrupt-*")
			assert.Empty(t, aside, "not moved aside")
			assert.Contains(t, logged, td.claims, "the file")
			assert.Contains(t, logged, `claim uid-1 (ns/app)`, "the claim")
			assert.Contains(t, logged, `"unanswered" is `+bad+`, not true or false`, "the field and its value")
			assert.Contains(t, logged, "read as true", "what it was read as")
			assert.Contains(t, logged, "delete the pod", "what to do")
			assert.NotContains(t, logged, "move it back")
		})
	}
}

// A claim's mark of true or false loads as such, in a file of the release
// before, which marks no request: the claim's mark stands for them all.
func TestAClaimsFileWithAGoodUnansweredMarkLoads(t *testing.T) {
	for _, good := range []string{`true`, `false`} {
		t.Run(good, func(t *testing.T) {
			td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
			claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
			require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
			cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
			data, err := os.ReadFile(filepath.Clean(td.claims))
			require.NoError(t, err)
			before := strings.Replace(string(data), `,"unanswered":true,"prepare":1}`, `}`, 1)
			require.NotEqual(t, string(data), before, "the request's marks, which that release did not write")
			require.NoError(t, os.WriteFile(td.claims, []byte(strings.Replace(before, `"unanswered":true}}}`, `"unanswered":`+good+`}}}`, 1)), 0o600))

			d, _ := td.restartLogged(t)
			require.Contains(t, d.Claims(), "uid-1")
			want := preparedOn{"ns/app/cpus", cpus.String(), false}
			if good == "true" {
				want = preparedOn{"", "", false}
			}
			assert.Equal(t, want, askPreparedOnRunning(d, cpus))
		})
	}
}

// A request's unanswered mark is true or false, and its Prepare number
// an integer from 0 to 2^53 (absent: 0): a bad mark reads as true, a bad
// number as the claim's newest Prepare, marked, for that request alone,
// naming the claim, the request and the field. A null Prepare number
// would load as 0, the oldest, whose mark any container of the claim
// clears.
func TestAClaimsFileWithABadRequestMarkReadsItOnTheSafeSideNamingTheRequestAndTheField(t *testing.T) {
	for _, bad := range []struct{ field, value string }{
		{"unanswered", `"yes"`}, {"unanswered", `null`}, {"unanswered", `1`},
		{"prepare", `null`}, {"prepare", `-1`}, {"prepare", `"1"`}, {"prepare", `1.5`}, {"prepare", `true`}, {"prepare", `{}`},
		{"prepare", `9007199254740993`},
	} {
		t.Run(bad.field+"="+bad.value, func(t *testing.T) {
			td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
			claim := allocatedClaim("uid-1", "app", slots{"a": slotsOn(pools.Exclusive, 1, 0, 4), "b": slotsOn(pools.Exclusive, 1, 4, 4)}, "pod-1")
			require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
			editClaimsFile(t, td.claims, func(claims map[string]any) {
				reqs := claims["uid-1"].(map[string]any)["requests"].(map[string]any)
				reqs["a"].(map[string]any)["unanswered"] = false
				reqs["a"].(map[string]any)["prepare"] = json.Number("7")
				reqs["b"].(map[string]any)["unanswered"] = false
				reqs["b"].(map[string]any)["prepare"] = json.Number("3")
				reqs["b"].(map[string]any)[bad.field] = json.RawMessage(bad.value)
			})

			d, logged := td.restartLogged(t)
			require.Contains(t, d.Claims(), "uid-1", "kept")
			got := d.Claims()["uid-1"].Requests
			assert.True(t, got["b"].Unanswered, "read as unanswered")
			assert.False(t, got["a"].Unanswered, "the other request as written")
			if bad.field == "prepare" {
				assert.Equal(t, uint64(8), got["b"].Prepare, "above every other request of the claim")
			}
			aside, _ := filepath.Glob(td.claims + ".corrupt-*")
			assert.Empty(t, aside, "not moved aside")
			assert.Contains(t, logged, td.claims, "the file")
			assert.Contains(t, logged, `claim uid-1 (ns/app) request b: its "`+bad.field+`" is `+bad.value+`, not `, "the claim, the request, the field and its value")
			assert.Contains(t, logged, "read as", "what it was read as")
		})
	}
}

// A request's CPUs that are no CPU list (a file edited by hand or
// damaged) drop that claim alone, naming the claim and the request; its
// container showing its token is told why. Before, they loaded as no CPUs
// at all: the claim's token was known, but its CPUs were held against
// nothing, and the next placement could give them to another claim or
// container.
func TestAClaimsFileWithRequestCPUsThatAreNoListDropsThatClaim(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	env := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]
	cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
	data, err := os.ReadFile(filepath.Clean(td.claims))
	require.NoError(t, err)
	good := `"cpus":"` + cpus.String() + `"`
	require.Contains(t, string(data), good)
	require.NoError(t, os.WriteFile(td.claims, []byte(strings.Replace(string(data), good, `"cpus":"24-x"`, 1)), 0o600))

	d, logged := td.restartLogged(t)
	assert.Empty(t, d.Claims(), "dropped")
	assert.Contains(t, logged, td.claims, "the file")
	assert.Contains(t, logged, `claim uid-1 (ns/app): its request cpus's "cpus" "24-x" are no CPU list`, "the claim, the request, the value")
	_, _, err = d.Lookup(envWith(env), Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "c"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "claim uid-1 (ns/app) was dropped from")
	assert.Contains(t, err.Error(), "delete the pod")
}
