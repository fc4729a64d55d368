package plugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/state"
)

// populate runs an exclusive, an exclusive-non-isolcpus and an infra
// container.
func populate(t *testing.T, f *fakeRuntime) (fwd, eni, app *api.Container) {
	t.Helper()
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev/container.fwd": "exclusive", "pool.cpupool.dev/container.eni": "exclusive-non-isolcpus"}})
	var err error
	fwd, _, err = f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	eni, _, err = f.createContainer(pod, "eni", 1000)
	require.NoError(t, err)
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	app, _, err = f.createContainer(web, "app", 500)
	require.NoError(t, err)
	return fwd, eni, app
}

func TestPluginRestartKeepsEveryContainerWhereItRuns(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	fwd, eni, app := populate(t, f)
	require.Equal(t, "4,12", f.cpus(fwd))
	require.Equal(t, "1", f.cpus(eni))
	require.Equal(t, "0,8-9", f.cpus(app))
	first.stop() // as kill -9 would: nothing is said to the runtime

	// While the plugin is away, a pod starts unpinned.
	late := f.runPod(podSpec{name: "late", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	lateCtr, _, err := f.createContainer(late, "c", 2000)
	require.NoError(t, err)
	require.Equal(t, "", f.cpus(lateCtr), "no plugin, no pinning")

	second := startPlugin(t, f, desktop, statePath(f))
	assert.Equal(t, "4,12", f.cpus(fwd), "exclusive container not moved")
	assert.Equal(t, "1", f.cpus(eni), "exclusive-non-isolcpus container not moved")
	assert.Equal(t, "0,8-9", f.cpus(app), "infra member unchanged")
	lateCPUs := mustParse(f.cpus(lateCtr))
	assert.Equal(t, 2, lateCPUs.Size(), "container created while away is placed")
	assert.True(t, lateCPUs.Intersection(mustParse("4,12")).IsEmpty())

	next := f.runPod(podSpec{name: "next", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	nextCtr, _, err := f.createContainer(next, "c", 4000)
	require.NoError(t, err)
	assert.True(t, mustParse(f.cpus(nextCtr)).Intersection(mustParse("4,12").Union(lateCPUs)).IsEmpty(), "restored CPUs are held")

	assert.Len(t, second.savedState(t).Containers, 5)
}

func TestVanishedContainersAreFreedOnRestart(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	fwd, _, _ := populate(t, f)
	first.stop()
	f.mu.Lock()
	delete(f.ctrs, fwd.Id) // exited while the plugin was away; its pod lives
	f.mu.Unlock()
	second := startPlugin(t, f, desktop, statePath(f))
	st := second.savedState(t)
	assert.NotContains(t, st.Containers, fwd.Id)
	require.Contains(t, st.Held, "uid-dpdk/fwd", "the kubelet may run it again: its CPUs stay held")
	assert.Equal(t, "4,12", st.Held["uid-dpdk/fwd"].CPUs)
	assert.Nil(t, st.Held["uid-dpdk/fwd"].ExitCode, "exit code unknown")
	pod := f.runPod(podSpec{name: "all", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err := f.createContainer(pod, "c", 8000)
	assert.ErrorContains(t, err, "cannot fit")
	second.stop()

	f.mu.Lock()
	delete(f.pods, "sb-dpdk") // and now its pod is gone too
	f.mu.Unlock()
	third := startPlugin(t, f, desktop, statePath(f))
	assert.Empty(t, third.savedState(t).Held)
	_, _, err = f.createContainer(pod, "c", 8000)
	assert.NoError(t, err, "the whole exclusive pool is free again")
}

func TestCorruptStateIsMovedAsideAndRebuilt(t *testing.T) {
	valid := func(t *testing.T) []byte {
		f := newFakeRuntime(t, false)
		p := startPlugin(t, f, desktop, statePath(f))
		populate(t, f)
		p.stop()
		b, err := os.ReadFile(statePath(f))
		require.NoError(t, err)
		return b
	}(t)
	tests := map[string][]byte{
		"garbage":           []byte("{not json"),
		"truncated":         valid[:len(valid)/2],
		"empty":             {},
		"checksum mismatch": []byte(tamper(valid)),
		"future schema":     []byte(`{"schemaVersion":99,"checksum":"x","state":{}}`),
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeRuntime(t, false)
			first := startPlugin(t, f, desktop, statePath(f))
			fwd, eni, app := populate(t, f)
			first.stop()
			require.NoError(t, os.WriteFile(statePath(f), content, 0o600))

			second := startPlugin(t, f, desktop, statePath(f))
			aside, _ := filepath.Glob(statePath(f) + ".corrupt-*")
			assert.Len(t, aside, 1, "bad file kept for inspection")
			assert.Equal(t, "4,12", f.cpus(fwd), "rebuilt from the runtime: exclusive stays")
			assert.Equal(t, "1", f.cpus(eni))
			assert.Equal(t, "0,8-9", f.cpus(app))
			assert.Len(t, second.savedState(t).Containers, 3, "a fresh, valid state is written")
		})
	}
}

// tamper changes one CPU digit inside the state without fixing the checksum.
func tamper(valid []byte) string {
	s := string(valid)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '4' {
			return s[:i] + "5" + s[i+1:]
		}
	}
	return s + "x"
}

func TestRuntimeRestartReconnectsWithoutMovingContainers(t *testing.T) {
	f := newFakeRuntime(t, false)
	startPlugin(t, f, desktop, statePath(f))
	fwd, eni, app := populate(t, f)
	f.waitSynced(f.restart())
	assert.Equal(t, "4,12", f.cpus(fwd))
	assert.Equal(t, "1", f.cpus(eni))
	assert.Equal(t, "0,8-9", f.cpus(app))
	for _, u := range f.syncUpdates {
		assert.NotEqual(t, fwd.Id, u.ContainerId, "no update moves a pinned container")
	}
	pod := f.runPod(podSpec{name: "after", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	c, _, err := f.createContainer(pod, "c", 2000)
	require.NoError(t, err, "the plugin serves the new runtime")
	assert.True(t, mustParse(f.cpus(c)).Intersection(mustParse("4,12")).IsEmpty())
}

// TestRuntimeLaunchedPlugin: the runtime starts the binary from its plugin
// directory, without arguments, and passes the configuration in Configure.
func TestRuntimeLaunchedPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	f := newFakeRuntime(t, false)
	f.r.Stop()
	bin := buildBinary(t)
	raw, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.pluginDir(), "10-cpupool"), raw, 0o755))
	stateFile := filepath.Join(f.dir, "launched-state.json")
	conf := fmt.Sprintf("isolatedCPUs: \"1\"\ncgroupRoot: %s\nstateFile: %s\n", f.cgroupRoot, stateFile)
	require.NoError(t, os.WriteFile(filepath.Join(f.pluginConfigDir(), "10-cpupool.conf"), []byte(conf), 0o644))

	// The launched binary has no arguments: it locks the default state
	// directory until the drop-in's Configure names another. That one
	// must then be left as it was, on this machine too (a run of this test
	// left /var/lib/nri-cpupool/nri-cpupool.lock behind).
	defaultDir := filepath.Dir(config.Default().StateFile)
	_, statErr := os.Stat(defaultDir)
	hadDefaultDir := statErr == nil

	before := f.syncCount()
	os.Remove(f.runtimeSocket())
	f.start() // launches 10-cpupool
	t.Cleanup(f.r.Stop)
	f.waitSynced(before)

	pod := f.runPod(podSpec{name: "rl", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	ctr, _, err := f.createContainer(pod, "c", 1000)
	require.NoError(t, err)
	assert.Equal(t, "1", f.cpus(ctr), "configuration from the runtime's drop-in")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := state.ReadState(stateFile)
		require.NoError(c, err, "state file from the runtime's drop-in")
		assert.Contains(c, st.Containers, ctr.Id)
	}, 5*time.Second, 5*time.Millisecond, "the writer catches up within milliseconds")
	assert.FileExists(t, state.LockPath(stateFile), "the lock moved to the drop-in's state directory")
	if !hadDefaultDir {
		assert.NoDirExists(t, defaultDir, "the default state directory, unused, is removed with its lock")
	}
}

// TestConfigChangeKeepsRunningContainers: a restart with a config whose
// exclusive pool no longer holds a running container's CPUs keeps the
// container where it runs and says so.
func TestConfigChangeKeepsRunningContainers(t *testing.T) {
	f := newFakeRuntime(t, false)
	first := startPlugin(t, f, desktop, statePath(f))
	fwd, _, app := populate(t, f)
	first.stop()

	moved := testNode{fixture: desktop.fixture, config: `
isolatedCPUs: "2-7,10-15"
pools:
  exclusive: {cpus: "6-7,14-15"}
  shared: {cpus: "2-5,10-13"}
`}
	second := startPlugin(t, f, moved, statePath(f))
	assert.Equal(t, "4,12", f.cpus(fwd), "not moved by a config change")
	assert.Contains(t, second.log.String(), "CPUs 4,12 are outside pool exclusive (6-7,14-15) as now configured")
	assert.Equal(t, "0,8-9", f.cpus(app), "infra leaves out CPU 1, which the exclusive-non-isolcpus container keeps")
	pod := f.runPod(podSpec{name: "new", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	c, _, err := f.createContainer(pod, "c", 4000)
	require.NoError(t, err)
	assert.Equal(t, "6-7,14-15", f.cpus(c))
}

// v1File is a state file written by the first release (see state's
// TestMigrateV1).
const v1File = "../state/testdata/v1-2a6c3c2.json"

func schemaOf(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var env struct {
		SchemaVersion int `json:"schemaVersion"`
	}
	require.NoError(t, json.Unmarshal(data, &env))
	return env.SchemaVersion
}

// TestV1FileStartsThePlugin: a plugin started on the previous schema's file
// keeps the remembered containers where the runtime runs them and writes
// the file back in the current schema.
func TestV1FileStartsThePlugin(t *testing.T) {
	f := newFakeRuntime(t, false)
	path := statePath(f)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	data, err := os.ReadFile(v1File)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	rp := startPlugin(t, f, desktop, path)
	assert.Contains(t, rp.log.String(), fmt.Sprintf("is schema version 1; migrated to %d", state.SchemaVersion))
	st := rp.savedState(t)
	assert.Equal(t, state.SchemaVersion, schemaOf(t, path))
	assert.Empty(t, st.Containers, "the runtime runs none of them: forgotten, not invented")
}
