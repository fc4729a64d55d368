package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/state"
)

// Finding 4: updates caused by a removal travelled asynchronously, and an
// older "infra grew" update could land after a newer "infra shrank" one,
// putting an infra container on a CPU lent to an exclusive container.
func TestRemovalUpdatesNeverCarryStalePools(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, desktop, statePath(f))
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	app, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	eni, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "0,8-9", f.cpus(app))

	f.mu.Lock()
	f.updateDelay = 300 * time.Millisecond // a busy runtime
	f.mu.Unlock()
	f.removeContainer(eni)
	require.NoError(t, f.r.RemovePodSandbox(t.Context(), &api.RemovePodSandboxRequest{Pod: pod})) // infra grows: 0-1,8-9
	require.Equal(t, "0-1,8-9", f.sandboxCPUs(web), "the release happened")
	time.Sleep(50 * time.Millisecond)
	pod2 := f.runPod(podSpec{name: "eni2", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}})
	eni2, _, err := f.createContainer(pod2, "c", 1000) // infra shrinks again
	require.NoError(t, err)
	time.Sleep(600 * time.Millisecond) // anything in flight has landed
	assert.True(t, mustParse(f.cpus(app)).Intersection(mustParse(f.cpus(eni2))).IsEmpty(),
		"infra member %s on the CPU lent to %s", f.cpus(app), f.cpus(eni2))
}

// Finding 5: CPUs this node does not have, in the state file or in the
// runtime's cpusets, crashed Synchronize with an index out of range.
func TestUnknownCPUsAreDroppedAndTheContainerRepinned(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	fwd, eni, app := populate(t, f)
	first.stop()
	st, err := state.ReadState(statePath(f))
	require.NoError(t, err)
	c := st.Containers[fwd.Id]
	c.CPUs, c.Reserved = "4,300", "1000"
	st.Containers[fwd.Id] = c
	st.Previous["uid-dpdk/old"] = "5,4000"
	require.NoError(t, state.NewFileStore(statePath(f)).Save(st))
	f.setCPUs(fwd, "4,300")
	f.setCPUs(eni, "1,65000")

	rp := startPlugin(t, f, desktop, statePath(f))
	fwdCPUs := mustParse(f.cpus(fwd))
	assert.Equal(t, 2, fwdCPUs.Size(), "re-pinned to a whole set: %s", fwdCPUs)
	assert.True(t, fwdCPUs.IsSubsetOf(mustParse("4-7,12-15")))
	assert.Equal(t, "1", f.cpus(eni))
	assert.Equal(t, "0,8-9", f.cpus(app))
	assert.Contains(t, rp.log.String(), "not on this node")
}

// flakyStore fails saves while fail is set. The background writer calls
// Save while the test sets fail, hence the atomic.
type flakyStore struct {
	state.Store
	fail atomic.Bool
}

func (s *flakyStore) Save(st *state.State) error {
	if s.fail.Load() {
		return errors.New("disk full")
	}
	return s.Store.Save(st)
}

// Finding 6: a repeated CreateContainer for a container the plugin holds,
// followed by a failed state write, freed the running container's CPUs.
func TestRepeatedCreateIsIdempotent(t *testing.T) {
	store := &flakyStore{Store: state.NewFileStore(t.TempDir() + "/state.json")}
	p := newUnitPlugin(t, store, `isolatedCPUs: "4-7,12-15"`)
	ctx := context.Background()
	_, err := p.Synchronize(ctx, nil, nil)
	require.NoError(t, err)
	pod := &api.PodSandbox{Id: "sb", Name: "p", Uid: "u", Namespace: "ns", Annotations: map[string]string{"pool.cpupool.dev": "exclusive"}}
	ctr := &api.Container{Id: "c1", Name: "c", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Shares: api.UInt64(2048)}}}}
	adj, _, err := p.CreateContainer(ctx, pod, ctr)
	require.NoError(t, err)

	store.fail.Store(true)
	again, _, err := p.CreateContainer(ctx, pod, ctr)
	require.NoError(t, err, "nothing new to record")
	assert.Equal(t, adj.GetLinux().GetResources().GetCpu().GetCpus(), again.GetLinux().GetResources().GetCpu().GetCpus())
	a, ok := p.alloc.Get("c1")
	require.True(t, ok, "the running container keeps its CPUs")
	assert.True(t, a.CPUs.Intersection(p.alloc.FreeCPUs("exclusive")).IsEmpty())
}

// Finding 7: rebuilding from a corrupt state lost the idle siblings of a
// hide-hyperthreads container, and the next container got them.
func TestCorruptStateKeepsHiddenSiblingsIdle(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "ht", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "hide-hyperthreads.cpupool.dev": "true"}})
	ht, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	cpus := mustParse(f.cpus(ht))
	require.Equal(t, 2, cpus.Size())
	first.stop()
	require.NoError(t, os.WriteFile(statePath(f), []byte("{corrupt"), 0o600))

	startPlugin(t, f, desktop, statePath(f))
	assert.Equal(t, cpus.String(), f.cpus(ht), "kept where it runs")
	held := cpus
	for _, c := range cpus.List() {
		held = held.Union(mustParse(fmt.Sprint(c ^ 8))) // desktop: CPU n and n+8 share a core
	}
	other := f.runPod(podSpec{name: "other", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	o, _, err := f.createContainer(other, "c", 4000)
	require.NoError(t, err)
	assert.True(t, mustParse(f.cpus(o)).Intersection(held).IsEmpty(), "%s handed out although %s holds %s", f.cpus(o), cpus, held)
	_, _, err = f.createContainer(other, "d", 1000)
	assert.ErrorContains(t, err, "cannot fit", "the hidden siblings stay idle")
}

// TestDroppedCPUsOfARecordAreSaidOnceAtARestart: a record naming a CPU
// this node does not have is read by several steps of a restart (the
// readmission order, the readmission, the resize check); each said it was
// dropped, so the same warning stood three times in the log.
func TestDroppedCPUsOfARecordAreSaidOnceAtARestart(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	fwd, _, _ := populate(t, f)
	first.stop()
	st, err := state.ReadState(statePath(f))
	require.NoError(t, err)
	c := st.Containers[fwd.Id]
	c.CPUs = c.CPUs + ",300"
	st.Containers[fwd.Id] = c
	require.NoError(t, state.NewFileStore(statePath(f)).Save(st))

	rp := startPlugin(t, f, desktop, statePath(f))
	assert.Equal(t, 1, strings.Count(rp.log.String(), "CPUs 300 are not on this node; dropped"), "log:\n%s", grepLog(rp.log.String(), "dropped"))
}
