package plugin

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
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

// TestConfinedContainerWithoutASandboxKeepsItsRememberedPod: a remembered
// exclusive container the runtime runs without its pod sandbox, not on its
// CPUs, whose CPUs another container took: Synchronize confines it to infra
// and its record keeps the pod the state remembered (confine looked it up
// in memory, which Synchronize had started over: it was lost).
func TestConfinedContainerWithoutASandboxKeepsItsRememberedPod(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	store := state.NewFileStore(path)
	st := state.NewState()
	st.Containers["aaa"] = state.ContainerState{PodUID: "uid-keep", PodNamespace: "telco", PodName: "keep", Container: "c", Pool: "exclusive", MilliCPU: 1000, CPUs: "4", Mems: "0"}
	st.Containers["bbb"] = state.ContainerState{PodUID: "uid-lost", PodNamespace: "telco", PodName: "lost", Container: "c", Pool: "exclusive", MilliCPU: 1000, CPUs: "4", Mems: "0"}
	require.NoError(t, store.Save(st))
	p := newUnitPlugin(t, store, `isolatedCPUs: "4-7,12-15"`)
	pinned := func(id, sandbox, cpus string) *api.Container {
		return &api.Container{Id: id, PodSandboxId: sandbox, Name: "c", State: api.ContainerState_CONTAINER_RUNNING,
			Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: cpus}}}}
	}
	_, err := p.Synchronize(context.Background(), []*api.PodSandbox{{Id: "sb-keep", Uid: "uid-keep", Name: "keep", Namespace: "telco"}},
		[]*api.Container{pinned("aaa", "sb-keep", "4"), pinned("bbb", "sb-gone", "")})
	require.NoError(t, err)
	require.NoError(t, p.Flush())
	back, err := state.ReadState(path)
	require.NoError(t, err)
	rec := back.Containers["bbb"]
	require.Equal(t, "infra", rec.Pool, "confined to infra")
	assert.Equal(t, "telco", rec.PodNamespace)
	assert.Equal(t, "lost", rec.PodName)
	assert.Equal(t, "uid-lost", rec.PodUID)
	assert.Equal(t, "confined", rec.Rule)
	assert.Contains(t, rec.RuleDetail, "its pod sandbox is gone")
}
