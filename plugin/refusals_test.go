package plugin

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/state"
)

// TestStateRecordsTheRuleThatDecided: each container's record says what
// chose its pool (the annotation and its key, the default pool), and a
// restarted plugin keeps it for the containers it keeps where they run.
func TestStateRecordsTheRuleThatDecided(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	fwd, _, app := populate(t, f)
	check := func(st *state.State) {
		t.Helper()
		got := st.Containers[fwd.GetId()]
		assert.Equal(t, allocator.RuleAnnotation, got.Rule)
		assert.Equal(t, "pool.cpupool.dev/container.fwd=exclusive", got.RuleDetail)
		web := st.Containers[app.GetId()]
		assert.Equal(t, allocator.RuleDefault, web.Rule)
		assert.Equal(t, "defaultPool", web.RuleDetail)
	}
	check(first.savedState(t))
	first.stop()
	second := startPlugin(t, f, desktop, statePath(f))
	check(second.savedState(t))
}

// TestRefusalsAreRemembered: the last refusal of a refused container is in
// the state file with the message the runtime got and how often it was
// refused; a Synchronize keeps it while its pod lives; placing the
// container forgets it, and so does removing its pod.
func TestRefusalsAreRemembered(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/container.fwd": "exlusive"}})
	for range 2 {
		_, _, err := f.createContainer(pod, "fwd", 2000)
		require.Error(t, err)
	}
	st := first.savedState(t)
	require.Len(t, st.Refusals, 1)
	r := st.Refusals[0]
	assert.Equal(t, "telco", r.PodNamespace)
	assert.Equal(t, "dpdk", r.PodName)
	assert.Equal(t, "fwd", r.Container)
	assert.Equal(t, allocator.ReasonAnnotation, r.Reason)
	assert.Equal(t, 2, r.Count)
	assert.Contains(t, r.Message, `nri-cpupool: container telco/dpdk/fwd: annotation pool.cpupool.dev/container.fwd="exlusive": unknown pool`)
	assert.False(t, r.Time.IsZero())
	first.stop()

	second := startPlugin(t, f, desktop, statePath(f))
	require.Len(t, second.savedState(t).Refusals, 1, "kept over a restart while the pod lives")
	f.removePod(pod)
	assert.Empty(t, second.savedState(t).Refusals, "forgotten with its pod")

	// Refused (the pool is too small), then placed: forgotten.
	big := f.runPod(podSpec{name: "big", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err := f.createContainer(big, "c", 64000)
	require.Error(t, err)
	st = second.savedState(t)
	require.Len(t, st.Refusals, 1)
	assert.Equal(t, allocator.ReasonPlacement, st.Refusals[0].Reason)
	_, _, err = f.createContainer(big, "c", 2000)
	require.NoError(t, err)
	assert.Empty(t, second.savedState(t).Refusals, "forgotten once placed")
}

// TestRefusalsAreBounded: tenants choose how many containers are refused;
// the file keeps the last MaxRefusals, oldest forgotten first.
func TestRefusalsAreBounded(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	for i := range state.MaxRefusals + 2 {
		pod := f.runPod(podSpec{name: fmt.Sprintf("p%d", i), namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "nope"}})
		_, _, err := f.createContainer(pod, "c", 1000)
		require.Error(t, err)
	}
	st := rp.savedState(t)
	require.Len(t, st.Refusals, state.MaxRefusals)
	assert.Equal(t, "p2", st.Refusals[0].PodName)
	assert.Equal(t, fmt.Sprintf("p%d", state.MaxRefusals+1), st.Refusals[len(st.Refusals)-1].PodName)
}
