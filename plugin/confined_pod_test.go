package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfinedContainerKeepsItsPod (review 59b): a container created while
// the plugin was away, which Synchronize cannot place and confines to
// infra, must be recorded with its pod. The runtime names the pod at
// Synchronize (the CPUPoolConfined Event is posted on it), but confine
// takes the pod only from the remembered state, which has no record of a
// container created meanwhile: the record has an empty namespace, name and
// UID, so `nri-cpupool explain web/sneaky` answers "no pod web/sneaky in
// the state" and `status` lists a nameless row with request 0m.
func TestConfinedContainerKeepsItsPod(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	populate(t, f)
	first.stop()

	web := f.runPod(podSpec{name: "sneaky", namespace: "web", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	sneaky, _, err := f.createContainer(web, "c", 2000)
	require.NoError(t, err)

	second := startPlugin(t, f, desktop, statePath(f))
	st := second.savedState(t)
	rec, ok := st.Containers[sneaky.GetId()]
	require.True(t, ok, "the confined container is in the state")
	require.Equal(t, "infra", rec.Pool, "confined to infra")
	assert.Equal(t, "web", rec.PodNamespace, "its pod's namespace")
	assert.Equal(t, "sneaky", rec.PodName, "its pod's name")
	assert.Equal(t, "uid-sneaky", rec.PodUID, "its pod's uid")
	// Why it was confined, for explain: its rule says so (explain shows a
	// running container's rule, not a refusal).
	assert.Equal(t, "confined", rec.Rule, "its rule")
	assert.Contains(t, rec.RuleDetail, "to pool infra when nri-cpupool synchronized with the runtime: ", "its rule's detail")
	assert.Contains(t, rec.RuleDetail, "recreate the pod to place it again", "its rule's detail says how to fix")
}
