package plugin

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAnnotationForAContainerThePodNeverCreated: a container-scoped
// annotation whose container never came ("pool.cpupool.dev/container.wbe"
// for a container named web) is reported when the pod's sandbox stops,
// naming the key and the containers the pod had, once; one that matched
// is not; a sandbox the plugin did not see start is not checked (issue 43,
// item 2).
func TestAnnotationForAContainerThePodNeverCreated(t *testing.T) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f))
	const warning = "which the pod never created"

	typo := f.runPod(podSpec{name: "typo", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev/container.wbe": "shared", "pool.cpupool.dev/container.sidecar": "shared"}})
	web, _, err := f.createContainer(typo, "web", 500)
	require.NoError(t, err)
	assert.Equal(t, "0-1,8-9", f.cpus(web), "the annotation matches no container: the default pool")
	assert.Contains(t, strings.ReplaceAll(rp.log.String(), `\"`, `"`),
		`container telco/typo/web: placed in pool infra without annotation pool.cpupool.dev/container.wbe, which names container "wbe", not created in this pod so far; if it is meant for "web", correct the name`,
		"a name two edits away is asked about at once")
	sidecar, _, err := f.createContainer(typo, "sidecar", 100)
	require.NoError(t, err)
	assert.NotContains(t, rp.log.String(), warning, "while the pod runs, a container named wbe may still come")
	// The state file keeps, for explain, the keys for other containers of
	// a container that has none of its own.
	saved := rp.savedState(t)
	assert.Equal(t, "pool.cpupool.dev/container.sidecar,pool.cpupool.dev/container.wbe", saved.Containers[web.GetId()].OtherContainerKeys)
	assert.Empty(t, saved.Containers[sidecar.GetId()].OtherContainerKeys, "sidecar has a key of its own")
	assert.NotContains(t, rp.log.String(), "telco/typo/sidecar: placed", "sidecar is far from wbe, and has its own annotation")
	_, _, err = f.createAttempt(typo, "web", 1, 500)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(rp.log.String(), "not created in this pod so far"), "asked once per name, not at each restart")

	f.stopPod(typo)
	f.removePod(typo)
	log := strings.ReplaceAll(rp.log.String(), `\"`, `"`) // logfmt escapes the quotes
	assert.Contains(t, log, `pod telco/typo: annotation pool.cpupool.dev/container.wbe names container "wbe", which the pod never created (it created "sidecar", "web")`)
	assert.NotContains(t, log, "container.sidecar names", "a matched annotation is not reported")
	assert.Equal(t, 1, strings.Count(log, warning), "once, at the stop, not again at the removal")
	assert.Equal(t, 1.0, testutil.ToFloat64(rp.p.metrics.unmatched))

	fine := f.runPod(podSpec{name: "fine", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev/container.web": "shared", "pool.cpupool.dev/container.web2": "shared"}})
	_, _, err = f.createContainer(fine, "web", 500)
	require.NoError(t, err)
	_, _, err = f.createContainer(fine, "web2", 500)
	require.NoError(t, err)
	f.stopPod(fine)
	assert.Equal(t, 1, strings.Count(rp.log.String(), warning), "every annotated container came")
	assert.Equal(t, 1, strings.Count(rp.log.String(), "not created in this pod so far"), "web has its own annotation: web2 is not asked about")
	assert.Equal(t, 1.0, testutil.ToFloat64(rp.p.metrics.unmatched))
}

func TestCreatedListIsBounded(t *testing.T) {
	names := map[string]bool{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		names[n] = true
	}
	assert.Equal(t, `"a", "b", "c", "d", "e", "f", "g", "h" and 2 more`, createdList(names))
	assert.Equal(t, "no container", createdList(nil))
}

// TestUnmatchedAnnotationsSortedWithoutWork: the unmatched container-scoped
// keys come sorted by key, whatever the map's order; and for a pod without
// any (the common case), typoCandidates, which runs before every
// creation's reply, allocates nothing (issue 45).
func TestUnmatchedAnnotationsSortedWithoutWork(t *testing.T) {
	ann := map[string]string{
		"pool.cpupool.dev/container.web":     "exclusive",
		"numa.cpupool.dev/container.db":      "0",
		"pool.cpupool.dev/container.cache":   "shared",
		"pool.cpupool.dev/container.zeta":    "shared",
		"irq.cpupool.dev/container.api":      "true",
		"pool.cpupool.dev/container.metrics": "shared",
		"pool.cpupool.dev/pod":               "shared",
		"example.com/container.other":        "x",
	}
	want := []unmatchedKey{
		{"irq.cpupool.dev/container.api", "api"},
		{"numa.cpupool.dev/container.db", "db"},
		{"pool.cpupool.dev/container.cache", "cache"},
		{"pool.cpupool.dev/container.metrics", "metrics"},
		{"pool.cpupool.dev/container.zeta", "zeta"},
	}
	for range 20 { // the map's order changes from one range to the next
		require.Equal(t, want, unmatchedAnnotations(ann, map[string]bool{"web": true}))
	}

	plain := map[string]string{"pool.cpupool.dev": "exclusive", "example.com/owner": "team-a"}
	allocs := testing.AllocsPerRun(100, func() {
		if near := typoCandidates(plain, "web"); near != nil {
			t.Fatalf("typo candidates %v for a pod without container-scoped keys", near)
		}
	})
	assert.Zero(t, allocs, "typoCandidates allocates for a pod without container-scoped keys")
}

// TestOtherContainerKeysOutliveARestart: the keys for other containers a
// record keeps for explain are read back from the state file when the
// plugin restarts, and written again with the rebuilt records.
func TestOtherContainerKeysOutliveARestart(t *testing.T) {
	f := newFakeRuntime(t, true)
	first := startPlugin(t, f, desktop, statePath(f))
	typo := f.runPod(podSpec{name: "typo", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/container.fwdd": "shared"}})
	fwd, _, err := f.createContainer(typo, "fwd", 500)
	require.NoError(t, err)
	const keys = "pool.cpupool.dev/container.fwdd"
	require.Equal(t, keys, first.savedState(t).Containers[fwd.GetId()].OtherContainerKeys)
	first.stop()

	second := startPlugin(t, f, desktop, statePath(f))
	_, _, err = f.createContainer(f.runPod(podSpec{name: "next", namespace: "telco"}), "c", 500)
	require.NoError(t, err) // a change, so that the file is written again
	assert.Equal(t, keys, second.savedState(t).Containers[fwd.GetId()].OtherContainerKeys)
}
