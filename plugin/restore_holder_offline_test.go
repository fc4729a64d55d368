package plugin

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKill9AfterSharedPartOnInfraWithTheHolderPartlyOfflineRepinsNobody is
// TestKill9AfterSharedPartOnInfraRepinsNoExclusiveNonIsolcpusContainer
// with CPU 12 of "old" (the holder of the whole shared pool 4,12) offline
// at restart #2, the runtime reporting what cgroup v1 leaves of old's
// cpuset (4). old is still readmitted on its record (sameWhileOffline),
// but readmitOrder now ranks it "off its record" after every other: the
// with-shared eni container is judged first, finds shared CPU 4 free, and
// is pinned again although it runs where it may.
func TestKill9AfterSharedPartOnInfraWithTheHolderPartlyOfflineRepinsNobody(t *testing.T) {
	allowed := "  exclusive-non-isolcpus: [telco]\n"
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, testNode{fixture: desktop.fixture, config: desktop.config + allowed}, statePath(f))
	oldPod := f.runPod(podSpec{name: "old", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	old, _, err := f.createContainer(oldPod, "c", 2000)
	require.NoError(t, err)
	pod := f.runPod(podSpec{name: "eni", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus", "shared-cpus.cpupool.dev": "true"}})
	eni, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(old), "precondition")
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

	setOnlineAt(t, f.sysfsRoot(desktop.fixture), 12, false)
	f.setCPUs(old, "4") // cgroup v1 drops an offline CPU; the runtime reads back the rest
	third := startPlugin(t, f, moved, statePath(f))
	t.Logf("old on %s, eni on %s", f.cpus(old), f.cpus(eni))
	assert.Equal(t, onInfra, f.cpus(eni))
	assert.NotContains(t, third.log.String(), "pinned again", "a container that runs where it may is not pinned again:\n%s", third.log.String())
}
