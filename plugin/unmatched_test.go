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
	_, _, err = f.createContainer(typo, "sidecar", 100)
	require.NoError(t, err)
	assert.NotContains(t, rp.log.String(), warning, "while the pod runs, a container named wbe may still come")
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
