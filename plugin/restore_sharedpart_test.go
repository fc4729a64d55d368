package plugin

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A with-shared container's shared part that ran on infra, and an
// exclusive-non-isolcpus container's lost grow (CPUs lent from infra), at
// a restart: neither moves a running container.

// An exclusive-non-isolcpus shared-cpus container (its exclusive CPUs lent
// from infra) grew live from 1 to 2 CPUs; a kill -9 lost the record. The
// restart read the lost grow's infra CPU as "its shared part on infra" and
// kept it on the record's one CPU, so keepResized never saw it: with the
// same config resizeAsTheRuntime grew it again elsewhere, and with a
// config that no longer allows the namespace the grow was refused and the
// running container lost the CPU it was given. It keeps where it runs.
func TestRestartKeepsAnENISharedCPUsContainersLostGrowWhereItRuns(t *testing.T) {
	for _, narrowed := range []bool{false, true} {
		t.Run(map[bool]string{false: "same config", true: "namespace no longer allowed"}[narrowed], func(t *testing.T) {
			node := testNode{fixture: desktop.fixture, config: desktop.config + "  exclusive-non-isolcpus: [telco]\n"}
			f := newFakeRuntime(t, false)
			first := startPlugin(t, f, node, statePath(f))
			pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus", "shared-cpus.cpupool.dev": "true"}})
			ctr, _, err := f.createContainer(pod, "c", 1000)
			require.NoError(t, err)
			before := f.cpus(ctr)
			require.NoError(t, first.p.Flush()) // the record of the 1-CPU container
			saved, err := os.ReadFile(statePath(f))
			require.NoError(t, err)
			_, err = f.updateContainer(pod, ctr, 2000) // a live grow
			require.NoError(t, err)
			grown := f.cpus(ctr)
			t.Logf("created on %s, grown live to %s", before, grown)
			require.NotEqual(t, before, grown)
			f.setRequest(ctr, 2000)
			first.kill()
			require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded the grow")

			next := node
			if narrowed {
				next.config = strings.Replace(node.config, "exclusive-non-isolcpus: [telco]", "exclusive-non-isolcpus: [other]", 1)
				require.NotEqual(t, node.config, next.config)
			}
			second := startPlugin(t, f, next, statePath(f))
			a, ok := second.p.alloc.Get(ctr.GetId())
			require.True(t, ok)
			t.Logf("after restart: %s (%dm), runtime %s\n%s", a.CPUs, a.MilliCPU, f.cpus(ctr), second.log.String())
			assert.Equal(t, grown, f.cpus(ctr), "a running container keeps the CPUs a resize the plugin accepted gave it")
			assert.Equal(t, int64(2000), a.MilliCPU)
			assert.Contains(t, second.log.String(), "keeping where it runs")
			assert.Equal(t, 0.0, testutil.ToFloat64(second.p.metrics.resizes.WithLabelValues("exclusive-non-isolcpus", "refused")))
		})
	}
}

// A shared-cpus container an outside tool widened onto infra (its
// exclusive part untouched) is Kept (infra beside its exclusive part reads
// as its shared part); the restart still pins it back on its exclusive
// part plus the shared pool.
func TestRestartPinsBackASharedCPUsContainerWidenedOntoInfra(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	dpdk, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	want := f.cpus(dpdk)
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setCPUs(dpdk, mustParse(want).Union(mustParse("0-1,8-9")).String())
	second := startPlugin(t, f, desktop, statePath(f))
	assert.Equal(t, want, f.cpus(dpdk), "pinned back:\n%s", second.log.String())
}

// Restart #1 (config moves the shared pool onto 4,12, which "old" holds)
// keeps "dpdk" where it runs (7,15, not its record's) and sends its shared
// part to infra; kill -9 before the state write. Restart #2 with the same
// config readmitted "dpdk" (id order) before "old", so the shared pool
// looked free, the infra CPUs looked like CPUs it had no business on, and
// the running exclusive container was repinned onto its stale record.
func TestKill9AfterKeptWhereItRunsWithSharedPartOnInfraMovesNobody(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	ex := map[string]string{"pool.cpupool.dev": "exclusive"}
	oldPod := f.runPod(podSpec{name: "old", namespace: "telco", annotations: ex})
	old, _, err := f.createContainer(oldPod, "c", 2000)
	require.NoError(t, err)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	dpdk, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	t.Logf("old on %s, dpdk on %s", f.cpus(old), f.cpus(dpdk))
	require.Equal(t, "4,12", f.cpus(old), "precondition")
	require.NoError(t, first.p.Flush())
	first.kill()
	f.setCPUs(dpdk, "2-3,7,10-11,15") // runs on another free set of its size

	moved := testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "2-3,5-7,10-11,13-15"}
  shared: {cpus: "4,12"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`}
	saved, err := os.ReadFile(statePath(f))
	require.NoError(t, err)
	second := startPlugin(t, f, moved, statePath(f))
	require.Equal(t, "0-1,7-9,15", f.cpus(dpdk), "restart #1 keeps it on 7,15, its shared part on infra:\n%s", second.log.String())
	second.kill()
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded restart #1")

	third := startPlugin(t, f, moved, statePath(f))
	assert.Equal(t, "0-1,7-9,15", f.cpus(dpdk), "a restart with the same config moves nobody:\n%s", third.log.String())
}

// As above with an exclusive-non-isolcpus shared-cpus container, whose
// exclusive CPU is lent from infra, so only a held shared pool tells that
// the infra CPUs beside it are its shared part: restart #2 readmitted it
// (id order) before "old", found the pool free, and pinned it again, onto
// the CPUs it runs on, with a false "not on its CPUs; pinned again".
func TestKill9AfterSharedPartOnInfraRepinsNoExclusiveNonIsolcpusContainer(t *testing.T) {
	allowed := "  exclusive-non-isolcpus: [telco]\n"
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, testNode{fixture: desktop.fixture, config: desktop.config + allowed}, statePath(f))
	oldPod := f.runPod(podSpec{name: "old", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	old, _, err := f.createContainer(oldPod, "c", 2000)
	require.NoError(t, err)
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus", "shared-cpus.cpupool.dev": "true"}})
	eni, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	t.Logf("old on %s, eni on %s", f.cpus(old), f.cpus(eni))
	require.Equal(t, "4,12", f.cpus(old), "precondition")
	require.Less(t, eni.GetId(), old.GetId(), "precondition: readmitted first in id order")
	require.NoError(t, first.p.Flush())
	saved, err := os.ReadFile(statePath(f))
	require.NoError(t, err)
	first.kill()

	moved := testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "2-3,5-7,10-11,13-15"}
  shared: {cpus: "4,12"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
` + allowed}
	second := startPlugin(t, f, moved, statePath(f))
	onInfra := f.cpus(eni)
	require.NotContains(t, mustParse(onInfra).List(), 4, "restart #1 put its shared part on infra:\n%s", second.log.String())
	second.kill()
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded restart #1")

	third := startPlugin(t, f, moved, statePath(f))
	assert.Equal(t, onInfra, f.cpus(eni))
	assert.NotContains(t, third.log.String(), "pinned again", "a container that runs where it may is not pinned again")
	assert.Contains(t, third.log.String(), "2 containers kept, 0 re-pinned")
}

// A restart that keeps a shared-cpus container where it runs, or pins it
// again on its record, while another container kept where it runs holds
// the whole shared pool, puts its shared part on infra: the log says so
// and why. restoreKnown and repairKnown dropped the note allocator.Readmit
// and allocator.Repin return with it, so the move went unexplained.
func TestRestartSaysWhyASharedPartRunsOnInfra(t *testing.T) {
	for name, runsOn := range map[string]string{"kept where it runs": "2-3,7,10-11,15", "pinned again": "0-15"} {
		t.Run(name, func(t *testing.T) {
			f := newFakeRuntime(t, false)
			first := startPlugin(t, f, desktop, statePath(f))
			oldPod := f.runPod(podSpec{name: "old", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
			old, _, err := f.createContainer(oldPod, "c", 2000)
			require.NoError(t, err)
			pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
			dpdk, _, err := f.createContainer(pod, "c", 2000)
			require.NoError(t, err)
			require.Equal(t, "4,12", f.cpus(old), "precondition")
			require.NoError(t, first.p.Flush())
			first.kill()
			f.setCPUs(dpdk, runsOn)

			second := startPlugin(t, f, testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "2-3,5-7,10-11,13-15"}
  shared: {cpus: "4,12"}
allowedNamespaces:
  exclusive: [telco]
`}, statePath(f))
			got := mustParse(f.cpus(dpdk))
			require.True(t, got.Contains(0) && !got.Contains(4), "its shared part runs on infra: %s\n%s", got, second.log.String())
			assert.Contains(t, second.log.String(), "its shared part runs on pool infra", "said why")
			// The note names the container by its pod, as the line before
			// it does: an operator greps for the pod, not the runtime's id.
			for _, line := range strings.Split(second.log.String(), "\n") {
				if strings.Contains(line, "its shared part runs on pool infra") {
					assert.Contains(t, line, "telco/dpdk/c", "the note names the pod")
					if id := dpdk.GetId(); len(id) > 12 {
						assert.NotContains(t, line, id, "a runtime id is cut as messages show it")
					}
				}
			}
		})
	}
}

// sharedPoolMovedTo4 is desktop with the shared pool moved to core 4
// (4,12) and exclusive-non-isolcpus on.
const sharedPoolMovedTo4 = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "2-3,5-7,10-11,13-15"}
  shared: {cpus: "4,12"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`

// Readmit reads infra CPUs beside a with-shared container's exclusive part
// as its shared part (sharedPartBeside), but keepResized (allocator.ExclusivePart)
// and allocator.ReadmitResized read "all it runs on beside the shared
// pool" as the exclusive part. A shared-cpus container grown live while
// its shared part ran on infra, the record of both lost to a kill -9: the
// restart counted its infra shared part as exclusive CPUs (7 CPUs for a
// 3000m request), refused to keep the grow, pinned it back on its record
// ("pinned again", a re-pinned count) and grew it again. With the same
// config as the run before, a running container is pinned again.
func TestALostGrowOfASharedCPUsContainerWithItsSharedPartOnInfraIsKept(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	oldPod := f.runPod(podSpec{name: "old", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	old, _, err := f.createContainer(oldPod, "c", 2000)
	require.NoError(t, err)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	dpdk, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(old), "precondition")
	require.NoError(t, first.p.Flush())
	saved, err := os.ReadFile(statePath(f))
	require.NoError(t, err)
	first.kill()

	moved := testNode{fixture: desktop.fixture, config: sharedPoolMovedTo4}
	second := startPlugin(t, f, moved, statePath(f))
	onInfra := f.cpus(dpdk)
	require.True(t, mustParse(onInfra).Contains(1), "restart #1 put its shared part on infra: %s\n%s", onInfra, second.log.String())
	// Another exclusive container, created after restart #1, takes the
	// CPUs the old shared pool had (its record is lost too: adopted where
	// it runs).
	fillPod := f.runPod(podSpec{name: "fill", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fill, _, err := f.createContainer(fillPod, "c", 4000)
	require.NoError(t, err)
	require.Equal(t, "2-3,10-11", f.cpus(fill), "precondition")
	_, err = f.updateContainer(pod, dpdk, 3000) // a live grow
	require.NoError(t, err)
	grown := f.cpus(dpdk)
	a, _ := second.p.alloc.Get(dpdk.GetId())
	require.Equal(t, 3, a.CPUs.Size(), "grown live: %s", grown)
	second.kill()
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded restart #1 and the grow")

	third := startPlugin(t, f, moved, statePath(f))
	b, _ := third.p.alloc.Get(dpdk.GetId())
	t.Logf("exclusive part %s grown live, %s after the restart; runtime %s -> %s\n%s", a.CPUs, b.CPUs, grown, f.cpus(dpdk), third.log.String())
	assert.Equal(t, a.CPUs.String(), b.CPUs.String(), "its exclusive part stays where it runs")
	assert.Equal(t, grown, f.cpus(dpdk))
	assert.NotContains(t, third.log.String(), "pinned again", "a container that runs where it may is not pinned again")
	assert.Contains(t, third.log.String(), "2 containers kept, 0 re-pinned")
}

// TestALostGrowOfASharedCPUsContainerWithItsSharedPartOnInfraIsKept with
// the same config throughout: the shared pool's CPUs went offline while the plugin
// was down, so restart #1 ran the shared part on infra.
func TestALostGrowOfASharedCPUsContainerWhileTheSharedPoolIsOfflineIsKept(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"}})
	dpdk, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err)
	require.NoError(t, first.p.Flush())
	saved, err := os.ReadFile(statePath(f))
	require.NoError(t, err)
	first.p.mu.Lock()
	root := first.p.cfg.SysfsRoot
	first.p.mu.Unlock()
	first.kill()
	for _, cpu := range []int{2, 3, 10, 11} {
		setOnlineAt(t, root, cpu, false)
	}

	second := startPlugin(t, f, desktop, statePath(f))
	onInfra := f.cpus(dpdk)
	require.True(t, mustParse(onInfra).Contains(1), "restart #1 put its shared part on infra: %s\n%s", onInfra, second.log.String())
	_, err = f.updateContainer(pod, dpdk, 3000) // a live grow
	require.NoError(t, err)
	grown := f.cpus(dpdk)
	a, _ := second.p.alloc.Get(dpdk.GetId())
	require.Equal(t, 3, a.CPUs.Size(), "grown live: %s", grown)
	second.kill()
	require.NoError(t, os.WriteFile(statePath(f), saved, 0o600), "kill -9 before the writer recorded restart #1 and the grow")

	third := startPlugin(t, f, desktop, statePath(f))
	b, _ := third.p.alloc.Get(dpdk.GetId())
	t.Logf("exclusive part %s grown live, %s after the restart; runtime %s -> %s\n%s", a.CPUs, b.CPUs, grown, f.cpus(dpdk), third.log.String())
	assert.Equal(t, grown, f.cpus(dpdk))
	assert.NotContains(t, third.log.String(), "pinned again", "a container that runs where it may is not pinned again")
	assert.Contains(t, third.log.String(), "1 containers kept, 0 re-pinned")
}
