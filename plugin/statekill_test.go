package plugin

import (
	"fmt"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/state"
)

// TestKillAfterReplyBeforeStateWriteLosesNoPinning: the plugin replies
// before its state is on disk. Killed in that window (here: a writer that
// would wait an hour), it restarts from a state file that lacks the last
// decisions, or from none at all, and the runtime's view of each
// container's cpuset puts everything back: no container moves, and every
// CPU is held by exactly the container that runs on it.
func TestKillAfterReplyBeforeStateWriteLosesNoPinning(t *testing.T) {
	for _, tc := range []struct {
		name string
		// written: the file holds the first containers, not what followed.
		written bool
	}{{"no state file yet", false}, {"state file older than the replies", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRuntime(t, false)
			first := startPluginTuned(t, f, desktop, statePath(f), func(p *Plugin) { p.writer.delay = time.Hour })
			fwd, eni, _ := populate(t, f)
			if tc.written {
				require.NoError(t, first.p.Flush())
				st, err := state.ReadState(statePath(f))
				require.NoError(t, err)
				require.Len(t, st.Containers, 3)
			}
			// After the write: CPUs change hands, infra shrinks and grows.
			f.stopContainer(fwd)
			f.removeContainer(fwd)
			f.stopContainer(eni)
			f.removeContainer(eni)
			telco := f.runPod(podSpec{name: "after", namespace: "telco", annotations: map[string]string{
				"pool.cpupool.dev/container.a": "exclusive", "pool.cpupool.dev/container.b": "exclusive",
				"pool.cpupool.dev/container.e": "exclusive-non-isolcpus", "pool.cpupool.dev/container.s": "shared",
				"pool.cpupool.dev/container.c": "exclusive"}})
			created := map[string]*api.Container{}
			for _, c := range []struct {
				name  string
				milli int64
			}{{"a", 2000}, {"b", 4000}, {"e", 1000}, {"s", 1000}} {
				ctr, _, err := f.createContainer(telco, c.name, c.milli)
				require.NoError(t, err)
				created[c.name] = ctr
			}
			// c takes CPUs a placement from scratch would give b.
			f.stopContainer(created["a"])
			f.removeContainer(created["a"])
			_, _, err := f.createContainer(telco, "c", 1000)
			require.NoError(t, err)
			web := f.runPod(podSpec{name: "web2", qos: "burstable"})
			_, _, err = f.createContainer(web, "app", 500)
			require.NoError(t, err)
			if tc.written {
				st, err := state.ReadState(statePath(f))
				require.NoError(t, err)
				require.Contains(t, st.Containers, fwd.Id, "the file still holds the old decisions")
			}
			before, heldBefore := runtimeCPUs(f), holdsOf(first.p)
			first.kill()

			second := startPlugin(t, f, desktop, statePath(f))
			after := runtimeCPUs(f)
			for id, cpus := range before {
				if pool := poolOf(second.p, id); pools.IsExclusive(pool) {
					assert.Equal(t, cpus, after[id], "%s container %s stays where it ran", pool, id)
				}
			}
			assertEveryCPUAccounted(t, f, second.p)
			// Holds made after the last write are lost, as with a lost file
			// (the runtime does not list exited containers); a hold is never
			// invented, and the stopped containers that were running in the
			// file get theirs back.
			heldAfter := holdsOf(second.p)
			for k, cpus := range heldAfter {
				assert.Equal(t, heldBefore[k], cpus, "hold %s", k)
			}
			if tc.written {
				assert.Contains(t, heldAfter, "uid-dpdk/fwd")
				assert.Contains(t, heldAfter, "uid-dpdk/eni")
			}

			next := f.runPod(podSpec{name: "next", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
			_, _, err = f.createContainer(next, "c", 1000)
			require.NoError(t, err, "an exclusive CPU is left")
			assertEveryCPUAccounted(t, f, second.p)
			assert.Len(t, second.savedState(t).Containers, len(runtimeCPUs(f)), "the file catches up with memory")
		})
	}
}

// runtimeCPUs is each running container's cpuset as the runtime has it.
func runtimeCPUs(f *fakeRuntime) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for id, c := range f.ctrs {
		if c.State != api.ContainerState_CONTAINER_STOPPED {
			out[id] = c.Linux.Resources.Cpu.Cpus
		}
	}
	return out
}

func poolOf(p *Plugin, id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, _ := p.alloc.Get(id)
	return a.Pool
}

// holdsOf is the CPUs the plugin holds for stopped containers, by pod and
// container name.
func holdsOf(p *Plugin) map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for _, h := range p.alloc.Holds() {
		out[h.Pod.UID+"/"+h.Container] = h.Held().String()
	}
	return out
}

// assertEveryCPUAccounted checks the plugin against the runtime: every
// running container is known and runs where the plugin placed it, no CPU
// is held twice (by running containers or for stopped ones), an exclusive
// pool's CPUs are either held or free, and infra keeps off held CPUs.
func assertEveryCPUAccounted(t *testing.T, f *fakeRuntime, p *Plugin) {
	t.Helper()
	running := runtimeCPUs(f)
	p.mu.Lock()
	defer p.mu.Unlock()
	held := cpuset.New()
	for id, cpus := range running {
		a, ok := p.alloc.Get(id)
		if !assert.True(t, ok, "running container %s is known", id) {
			continue
		}
		assert.Equal(t, a.CPUs.String(), cpus, "container %s (%s) runs where the plugin placed it", id, a.Pool)
		if pools.IsExclusive(a.Pool) {
			assert.True(t, held.Intersection(a.CPUs).IsEmpty(), "CPUs %s of %s are held twice", held.Intersection(a.CPUs), id)
			held = held.Union(a.CPUs)
		}
	}
	assert.Len(t, p.alloc.Assignments(), len(running), "no assignment without a running container")
	for _, h := range p.alloc.Holds() {
		assert.True(t, held.Intersection(h.Held()).IsEmpty(), "CPUs %s held for stopped %s are held twice", held.Intersection(h.Held()), h.ID)
		held = held.Union(h.Held())
	}
	layout := p.alloc.Layout()
	for _, pool := range []struct {
		name string
		cpus cpuset.CPUSet
	}{{pools.Exclusive, layout.Exclusive}, {pools.ExclusiveNonIsolcpus, layout.ExclusiveNonIsolcpus}} {
		free := p.alloc.FreeCPUs(pool.name)
		assert.True(t, free.Intersection(held).IsEmpty(), "%s: free and held at once", pool.name)
		assert.Equal(t, pool.cpus.String(), free.Union(held.Intersection(pool.cpus)).String(), "%s: every CPU is held or free", pool.name)
	}
	infra := p.alloc.PoolCPUs(pools.Infra)
	assert.True(t, infra.Intersection(held).IsEmpty(), "infra %s keeps off held CPUs %s", infra, held)
	assert.Equal(t, layout.Infra.String(), infra.Union(held.Intersection(layout.Infra)).String(), fmt.Sprintf("infra is what is not lent (held %s)", held))
}
