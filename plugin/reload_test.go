package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
)

// desktopGrown is desktop with CPUs 7 and 15 given from exclusive to
// shared: a reload that grows the shared pool out of free exclusive CPUs.
const desktopGrown = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-6,12-14"}
  shared: {cpus: "2-3,7,10-11,15"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`

// desktopShifted moves exclusive to 5-7,13-15 and shared to 2-4,10-12: it
// takes CPUs 4 and 12 from exclusive, where the first exclusive container
// runs.
const desktopShifted = `
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "5-7,13-15"}
  shared: {cpus: "2-4,10-12"}
  exclusive-non-isolcpus: {enabled: true}
allowedNamespaces:
  exclusive: [telco]
`

// reloadConfig parses a config for a running test plugin: its directories
// are the plugin's, as the daemon's flags would make them.
func reloadConfig(t *testing.T, rp *runningPlugin, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(strings.NewReader(yaml), "reloaded config")
	require.NoError(t, err)
	rp.p.mu.Lock()
	defer rp.p.mu.Unlock()
	cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile = rp.p.cfg.SysfsRoot, rp.p.cfg.CgroupRoot, rp.p.cfg.ProcRoot, rp.p.cfg.StateFile
	return cfg
}

func reloads(rp *runningPlugin, result string) float64 {
	return testutil.ToFloat64(rp.p.metrics.reloads.WithLabelValues(result))
}

func lastReload(t *testing.T, rp *runningPlugin) ReloadStatus {
	t.Helper()
	s, ok, err := ReadDaemonStatus(DaemonStatusFile(rp.p.cfg.StateFile))
	require.NoError(t, err)
	require.True(t, ok, "the daemon's status file is written at a reload")
	require.NotNil(t, s.LastReload)
	return *s.LastReload
}

// runDesktop starts a plugin on desktop with an exclusive container on
// 4,12 and a shared one.
func runDesktop(t *testing.T) (*fakeRuntime, *runningPlugin, map[string]string) {
	f := newFakeRuntime(t, true)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev/container.fwd": "exclusive", "pool.cpupool.dev/pod": "shared"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.Equal(t, "4,12", f.cpus(fwd))
	logger, _, err := f.createContainer(pod, "logger", 100)
	require.NoError(t, err)
	require.Equal(t, "2-3,10-11", f.cpus(logger))
	web := f.runPod(podSpec{name: "web", qos: "burstable"})
	app, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	return f, rp, map[string]string{"fwd": fwd.Id, "logger": logger.Id, "app": app.Id}
}

func ctrCPUs(f *fakeRuntime, id string) string {
	f.mu.Lock()
	c := f.ctrs[id]
	f.mu.Unlock()
	return f.cpus(c)
}

// TestReloadGrowsSharedWhileExclusiveRun: a reload that gives free
// exclusive CPUs to the shared pool is applied at once; the exclusive
// container stays where it runs, the shared member gets the grown pool
// without any container event (an update the plugin sends), and the device
// plugin's devices, the state file and status follow.
func TestReloadGrowsSharedWhileExclusiveRun(t *testing.T) {
	f, rp, ids := runDesktop(t)
	start := time.Now()
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktopGrown), nil, "test"))
	took := time.Since(start)
	// Reload returns once applied: the member's update answered.
	assert.Equal(t, "2-3,7,10-11,15", ctrCPUs(f, ids["logger"]), "the runtime has the member's update when Reload returns")
	r := lastReload(t, rp)
	assert.Positive(t, r.DurationMS)
	assert.LessOrEqual(t, r.DurationMS, float64(took.Microseconds())/1000, "measured from the trigger to the update's answer, within Reload")
	assert.Positive(t, r.InForceMS)
	assert.LessOrEqual(t, r.InForceMS, r.DurationMS, "the plugin's own part: in force before the runtime answers")
	assert.Equal(t, 1, r.Updated, "the shared member")
	assert.Regexp(t, `reload \(test\) applied in [0-9.]+ ms, in force after [0-9.]+ ms`, rp.log.String())
	assert.Contains(t, rp.log.String(), " (1 of 1 containers that follow the pools updated): pools: exclusive=")
	assert.Equal(t, uint64(1), histogramCount(t, rp, "cpupool_config_reload_seconds"))

	assert.Equal(t, "4,12", ctrCPUs(f, ids["fwd"]), "the exclusive container does not move")
	require.Eventually(t, func() bool { return ctrCPUs(f, ids["logger"]) == "2-3,7,10-11,15" }, 2*time.Second, 10*time.Millisecond,
		"the shared member follows the grown pool with no event of its own; it runs on %s", ctrCPUs(f, ids["logger"]))
	assert.Equal(t, "0-1,8-9", ctrCPUs(f, ids["app"]), "infra did not change")
	require.Eventually(t, func() bool {
		rp.p.mu.Lock()
		defer rp.p.mu.Unlock()
		return len(rp.p.pending) == 0
	}, time.Second, 5*time.Millisecond, "pushed and current: the next reply does not carry the member again")

	assert.Equal(t, 1.0, reloads(rp, ReloadApplied))
	r = lastReload(t, rp)
	assert.Equal(t, ReloadApplied, r.Result)
	assert.Equal(t, "test", r.Source)
	assert.WithinDuration(t, time.Now(), r.Time, 5*time.Second)

	var ex []string
	for _, d := range rp.p.Devices() {
		ex = append(ex, d.ID)
	}
	assert.Equal(t, []string{"4", "5", "6", "12", "13", "14"}, ex, "the device plugin advertises the new exclusive pool")
	st := rp.savedState(t)
	assert.Equal(t, "2-3,7,10-11,15", st.Pools["shared"])
	assert.Equal(t, "4,12", st.Containers[ids["fwd"]].CPUs)
	assert.Equal(t, "2-3,7,10-11,15", st.Containers[ids["logger"]].CPUs)

	// A new exclusive container is placed in the new pool.
	pod := f.runPod(podSpec{name: "dpdk2", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	c, _, err := f.createContainer(pod, "fwd", 4000)
	require.NoError(t, err)
	assert.Equal(t, "5-6,13-14", f.cpus(c))
	_, _, err = f.createContainer(pod, "more", 1000)
	require.Error(t, err, "7 and 15 are shared now: the exclusive pool is full")
}

// TestReloadThatWouldMoveIsRefused: a reload that takes a running
// exclusive container's CPUs out of its pool is refused, names the
// container and its CPUs, and leaves the old config in force; so does one
// that takes a stopped container's held CPUs.
func TestReloadThatWouldMoveIsRefused(t *testing.T) {
	f, rp, ids := runDesktop(t)
	err := rp.p.Reload(reloadConfig(t, rp, desktopShifted), nil, "test")
	require.Error(t, err)
	var re *ReloadError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, ReloadRefused, re.Result)
	require.Len(t, re.Blockers, 1)
	assert.Equal(t, "telco/dpdk/fwd", re.Blockers[0].Who)
	assert.Equal(t, "4,12", re.Blockers[0].CPUs.String())
	assert.Contains(t, err.Error(), "telco/dpdk/fwd (CPUs 4,12)")
	assert.Contains(t, rp.log.String(), "reload (test) refused: telco/dpdk/fwd would move")
	assert.Equal(t, 1.0, reloads(rp, ReloadRefused))
	assert.Equal(t, 0.0, reloads(rp, ReloadApplied))
	r := lastReload(t, rp)
	assert.Equal(t, ReloadRefused, r.Result)
	assert.Contains(t, r.Reason, "telco/dpdk/fwd")

	// The old config is in force: pools, members, placement.
	assert.Equal(t, "4-7,12-15", rp.p.alloc.Layout().Exclusive.String())
	assert.Equal(t, "2-3,10-11", ctrCPUs(f, ids["logger"]))
	pod := f.runPod(podSpec{name: "dpdk2", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/pod": "exclusive"}})
	c, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	assert.Equal(t, "5,13", f.cpus(c), "placed by the old layout")

	// Stopped, its CPUs are held for its pod: the hold blocks the reload too.
	f.mu.Lock()
	fwd := f.ctrs[ids["fwd"]]
	f.mu.Unlock()
	f.stopContainer(fwd)
	err = rp.p.Reload(reloadConfig(t, rp, desktopShifted), nil, "test")
	require.ErrorAs(t, err, &re)
	require.Len(t, re.Blockers, 1, "the hold; the new container on 5,13 stays in the new exclusive pool: %v", re.Blockers)
	assert.True(t, re.Blockers[0].Held)
	assert.Equal(t, "telco/dpdk/fwd", re.Blockers[0].Who)
	assert.Equal(t, "4,12", re.Blockers[0].CPUs.String())
	assert.Contains(t, err.Error(), "telco/dpdk/fwd (CPUs 4,12)")
}

// TestReloadInvalidKeepsTheConfig: a config that does not parse, does not
// fit the node, or moves the state file or the sysfs root is refused as
// invalid, and nothing changes.
func TestReloadInvalidKeepsTheConfig(t *testing.T) {
	f, rp, ids := runDesktop(t)
	_, perr := config.Parse(strings.NewReader("pools: {exclusiv: {}}"), "bad")
	require.Error(t, perr)
	for name, tc := range map[string]struct {
		cfg  func() *config.Config
		err  error
		want string
	}{
		"does not parse": {cfg: func() *config.Config { return nil }, err: perr, want: "exclusiv"},
		"overlapping pools": {cfg: func() *config.Config {
			return reloadConfig(t, rp, `{isolatedCPUs: "2-7,10-15", pools: {exclusive: {cpus: "4-7"}, shared: {cpus: "7,10"}}}`)
		}, want: "overlaps"},
		"offline-free but absent CPUs": {cfg: func() *config.Config {
			return reloadConfig(t, rp, `{isolatedCPUs: "2-7,10-15", pools: {exclusive: {cpus: "4-7,64"}}}`)
		}, want: "CPU 64 does not exist"},
		"stateFile": {cfg: func() *config.Config {
			c := reloadConfig(t, rp, desktopGrown)
			c.StateFile = filepath.Join(t.TempDir(), "state.json")
			return c
		}, want: "stateFile cannot change"},
		"sysfsRoot": {cfg: func() *config.Config {
			c := reloadConfig(t, rp, desktopGrown)
			c.SysfsRoot = t.TempDir()
			return c
		}, want: "sysfsRoot cannot change"},
	} {
		t.Run(name, func(t *testing.T) {
			before := reloads(rp, ReloadInvalid)
			err := rp.p.Reload(tc.cfg(), tc.err, "test")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var re *ReloadError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, ReloadInvalid, re.Result)
			assert.Equal(t, before+1, reloads(rp, ReloadInvalid))
			assert.Equal(t, ReloadInvalid, lastReload(t, rp).Result)
			assert.Equal(t, "4-7,12-15", rp.p.alloc.Layout().Exclusive.String())
			assert.Equal(t, statePath(f), rp.p.cfg.StateFile)
		})
	}
	assert.Equal(t, 0.0, reloads(rp, ReloadApplied))
	assert.Equal(t, "2-3,10-11", ctrCPUs(f, ids["logger"]))
}

// writeConfig replaces a config file as an editor does: a new file renamed
// over the old one.
func writeConfig(t *testing.T, path, yaml string) {
	t.Helper()
	tmp := path + ".swp"
	require.NoError(t, os.WriteFile(tmp, []byte(yaml), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// watchConfig serves WatchConfig on path for the test's plugin; load adds
// the plugin's directories, as the daemon's flags do.
func watchConfig(t *testing.T, rp *runningPlugin, path string) chan os.Signal {
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rp.p.WatchConfig(ctx, path, hup, func() (*config.Config, error) {
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			cfg, err := config.Parse(strings.NewReader(string(data)), path)
			if err != nil {
				return nil, err
			}
			rp.p.mu.Lock()
			defer rp.p.mu.Unlock()
			cfg.SysfsRoot, cfg.CgroupRoot, cfg.ProcRoot, cfg.StateFile = rp.p.cfg.SysfsRoot, rp.p.cfg.CgroupRoot, rp.p.cfg.ProcRoot, rp.p.cfg.StateFile
			return cfg, nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(50 * time.Millisecond) // the watch is set up
	return hup
}

func waitReloads(t *testing.T, rp *runningPlugin, result string, n float64) {
	t.Helper()
	require.Eventually(t, func() bool { return reloads(rp, result) == n }, 3*time.Second, 10*time.Millisecond,
		"%s reloads: %v", result, reloads(rp, result))
}

// TestReloadWhenTheFileChanges: an editor's rename over the file is seen,
// and so is a ConfigMap's swap of its ..data symlink; a bad file is
// counted as invalid and the old config stays; an unchanged file is no
// reload.
func TestReloadWhenTheFileChanges(t *testing.T) {
	f, rp, ids := runDesktop(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(desktop.config), 0o600))
	watchConfig(t, rp, path)

	writeConfig(t, path, "pools: {exclusiv: {}}\n")
	waitReloads(t, rp, ReloadInvalid, 1)
	assert.Equal(t, "2-3,10-11", ctrCPUs(f, ids["logger"]))

	writeConfig(t, path, desktopGrown)
	waitReloads(t, rp, ReloadApplied, 1)
	require.Eventually(t, func() bool { return ctrCPUs(f, ids["logger"]) == "2-3,7,10-11,15" }, 2*time.Second, 10*time.Millisecond)
	r := lastReload(t, rp)
	assert.Equal(t, "file changed", r.Source)
	assert.GreaterOrEqual(t, r.DurationMS, float64(ConfigDebounce.Milliseconds()), "timed from the save, the debounce included")
	assert.False(t, r.Trigger.After(r.Time.Add(-ConfigDebounce)), "the trigger is the save's event: %s, applied %s", r.Trigger, r.Time)

	// Touching it changes nothing.
	now := time.Now()
	require.NoError(t, os.Chtimes(path, now, now))
	time.Sleep(3 * ConfigDebounce)
	assert.Equal(t, 1.0, reloads(rp, ReloadApplied))

	// A ConfigMap volume: config.yaml -> ..data/config.yaml, and ..data is
	// a symlink to a timestamped directory, swapped by a rename.
	cm := t.TempDir()
	for i, yaml := range []string{desktopGrown, desktop.config} {
		ts := filepath.Join(cm, "..2026_"+string(rune('a'+i)))
		require.NoError(t, os.Mkdir(ts, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ts, "config.yaml"), []byte(yaml), 0o600))
	}
	require.NoError(t, os.Symlink("..2026_a", filepath.Join(cm, "..data")))
	require.NoError(t, os.Symlink("..data/config.yaml", filepath.Join(cm, "config.yaml")))
	rp2path := filepath.Join(cm, "config.yaml")
	watchConfig(t, rp, rp2path)
	require.NoError(t, os.Symlink("..2026_b", filepath.Join(cm, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(cm, "..data_tmp"), filepath.Join(cm, "..data")))
	waitReloads(t, rp, ReloadApplied, 2)
	require.Eventually(t, func() bool { return ctrCPUs(f, ids["logger"]) == "2-3,10-11" }, 2*time.Second, 10*time.Millisecond,
		"back to desktop's shared pool")
}

// TestReloadOnSIGHUP: SIGHUP reloads even an unchanged file (the operator
// asked), and a refused one is counted.
func TestReloadOnSIGHUP(t *testing.T) {
	f, rp, ids := runDesktop(t)
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(desktop.config), 0o600))
	hup := watchConfig(t, rp, path)
	hup <- os.Interrupt // any signal on the channel is a SIGHUP to it
	waitReloads(t, rp, ReloadApplied, 1)
	assert.Equal(t, "SIGHUP", lastReload(t, rp).Source)

	require.NoError(t, os.WriteFile(path+".new", []byte(desktopShifted), 0o600))
	// Written in place of the watched directory's file, without the
	// watcher: only the signal brings it in.
	require.NoError(t, os.Rename(path+".new", path))
	hup <- os.Interrupt
	waitReloads(t, rp, ReloadRefused, 1)
	assert.Equal(t, "4,12", ctrCPUs(f, ids["fwd"]))
	assert.Equal(t, "2-3,10-11", ctrCPUs(f, ids["logger"]))
}

// TestReloadThroughConfigure: once containers run, the runtime's Configure
// (a runtime-launched plugin, reconnected) is a reload: applied when
// nobody moves, refused (and Configure still succeeds, so that the plugin
// keeps pinning) when someone would.
func TestReloadThroughConfigure(t *testing.T) {
	f, rp, ids := runDesktop(t)
	ctx := context.Background()
	_, err := rp.p.Configure(ctx, desktopShifted, "fake-runtime", "v0")
	require.NoError(t, err)
	assert.Equal(t, 1.0, reloads(rp, ReloadRefused))
	assert.Equal(t, "NRI Configure", lastReload(t, rp).Source)
	assert.Equal(t, "4-7,12-15", rp.p.alloc.Layout().Exclusive.String())

	_, err = rp.p.Configure(ctx, desktopGrown, "fake-runtime", "v0")
	require.NoError(t, err)
	// The member's update is answered once Configure has returned: the
	// reload is counted then, in the background.
	waitReloads(t, rp, ReloadApplied, 1)
	require.Eventually(t, func() bool { return ctrCPUs(f, ids["logger"]) == "2-3,7,10-11,15" }, 2*time.Second, 10*time.Millisecond)
	r := lastReload(t, rp)
	assert.Equal(t, "NRI Configure", r.Source)
	assert.Equal(t, ReloadApplied, r.Result, "the earlier refusal does not overwrite it")
	assert.Positive(t, r.DurationMS)

	_, err = rp.p.Configure(ctx, desktopGrown, "fake-runtime", "v0")
	require.NoError(t, err)
	assert.Equal(t, 1.0, reloads(rp, ReloadApplied), "the config in force again is no reload")

	_, err = rp.p.Configure(ctx, "pools: {exclusiv: {}}", "fake-runtime", "v0")
	require.NoError(t, err, "a bad config from the runtime keeps the one in force")
	assert.Equal(t, 1.0, reloads(rp, ReloadInvalid))
}

// TestReloadKeepsKubeletAllocations: CPUs the kubelet allocated as
// cpupool.dev/exclusive devices for a container not created yet block a
// reload that takes them from the exclusive pool: its creation would be
// refused.
func TestReloadKeepsKubeletAllocations(t *testing.T) {
	_, rp, _ := runDesktop(t)
	env, err := rp.p.Grant([]string{"7"})
	require.NoError(t, err)
	err = rp.p.Reload(reloadConfig(t, rp, desktopGrown), nil, "test")
	var re *ReloadError
	require.ErrorAs(t, err, &re)
	require.Len(t, re.Blockers, 1)
	assert.Equal(t, "kubelet allocation "+env[EnvGrant], re.Blockers[0].Who)
	assert.Equal(t, "7", re.Blockers[0].CPUs.String())
	assert.Equal(t, "4-7,12-15", rp.p.alloc.Layout().Exclusive.String())
}

// TestReloadPowerClasses: a reload that drops the power classes puts every
// CPU's files back exactly as the node booted (the journal of originals),
// and one that brings them back applies them again; a running exclusive
// container keeps its CPUs throughout.
func TestReloadPowerClasses(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, poweredDesktop, statePath(f), slowPasses)
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	requireClass(t, f, cpuset.New(0, 1, 8, 9), saverCPU, "infra")
	requireClass(t, f, cpusOf(t, f, f.cpus(fwd)), lowLatencyCPU, "the exclusive container")

	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktop.config), nil, "test"))
	require.NoError(t, rp.p.FlushIsolation())
	requireClass(t, f, cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), bootedCPU, "no classes: every file as booted")
	assert.Equal(t, "4,12", f.cpus(fwd))

	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, poweredDesktop.config), nil, "test"))
	require.NoError(t, rp.p.FlushIsolation())
	requireClass(t, f, cpuset.New(0, 1, 8, 9), saverCPU, "infra again")
	requireClass(t, f, cpuset.New(2, 3, 10, 11), balancedCPU, "shared again")
	requireClass(t, f, cpuset.New(4, 12), lowLatencyCPU, "the exclusive container's class, from its pool")

	// A class changed: its CPUs get the new settings, from the originals.
	saver100 := strings.Replace(poweredDesktop.config, "saver: {resumeLatencyUS: 200, maxFreqKHz: base}", "saver: {resumeLatencyUS: 100}", 1)
	require.NotEqual(t, poweredDesktop.config, saver100)
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, saver100), nil, "test"))
	require.NoError(t, rp.p.FlushIsolation())
	requireClass(t, f, cpuset.New(0, 1, 8, 9), with(bootedCPU, "power/pm_qos_resume_latency_us", "100"), "the changed class, its max frequency back")
}

// TestReloadIRQIsolation: a reload that turns a pool's IRQ isolation on
// moves the IRQs off its CPUs, and one that turns it off again puts every
// IRQ back exactly as it was, with the containers where they run.
func TestReloadIRQIsolation(t *testing.T) {
	f := irqNode(t)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	require.Equal(t, originalAffinities, affinities(t, f))

	always := strings.Replace(desktop.config, `shared: {cpus: "2-3,10-11"}`, `shared: {cpus: "2-3,10-11", irqIsolation: always}`, 1)
	require.NotEqual(t, desktop.config, always)
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, always), nil, "test"))
	require.NoError(t, rp.p.FlushIsolation())
	requireIRQsOff(t, f, cpuset.New(2, 3, 10, 11))

	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktop.config), nil, "test"))
	require.NoError(t, rp.p.FlushIsolation())
	assert.Equal(t, originalAffinities, affinities(t, f), "every IRQ back exactly")
	assert.Equal(t, "4,12", f.cpus(fwd))
}

// TestReloadPolicyForNewContainers: namespaces, placement options and the
// log level of a reload apply to the containers created after it; the
// running ones stay where they are.
func TestReloadPolicyForNewContainers(t *testing.T) {
	f, rp, ids := runDesktop(t)
	ml := f.runPod(podSpec{name: "infer", namespace: "ml", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err := f.createContainer(ml, "model", 2000)
	require.Error(t, err, "ml may not use exclusive yet")

	opened := strings.Replace(desktop.config, "exclusive: [telco]", "exclusive: [telco, ml]", 1) +
		"allocation: {hideHyperthreads: true}\nlogLevel: debug\n"
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, opened), nil, "test"))
	assert.Equal(t, "debug", rp.p.log.GetLevel().String())
	c, _, err := f.createContainer(ml, "model", 2000)
	require.NoError(t, err, "the namespace may use exclusive now")
	assert.Equal(t, "5-6", f.cpus(c), "two CPUs of two cores, their siblings kept idle (hideHyperthreads)")
	assert.Equal(t, "4,12", ctrCPUs(f, ids["fwd"]))
}

// histogramCount is how many observations a histogram of the plugin's
// registry has, over its labels.
func histogramCount(t *testing.T, rp *runningPlugin, name string) uint64 {
	t.Helper()
	families, err := rp.p.Registry().Gather()
	require.NoError(t, err)
	var n uint64
	for _, mf := range families {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// TestReloadNotAppliedGaugeFollowsTheLastReload: a refused or invalid
// reload leaves the old config in force, which only the log and status
// said; cpupool_config_reload_not_applied is 1 until a reload is applied
// (its alert: CpupoolConfigReloadNotApplied).
func TestReloadNotAppliedGaugeFollowsTheLastReload(t *testing.T) {
	_, rp, _ := runDesktop(t)
	notApplied := func() float64 { return testutil.ToFloat64(rp.p.metrics.reloadNotApplied) }
	assert.Zero(t, notApplied(), "the config read at start is in force")

	require.Error(t, rp.p.Reload(nil, errors.New("yaml: line 3: did not find expected key"), "file changed"))
	assert.Equal(t, 1.0, notApplied(), "invalid: the file is not the config in force")
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktopGrown), nil, "test"))
	assert.Zero(t, notApplied(), "applied")

	err := rp.p.Reload(reloadConfig(t, rp, desktopShifted), nil, "SIGHUP")
	var re *ReloadError
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReloadRefused, re.Result)
	assert.Equal(t, 1.0, notApplied(), "refused: the file is not the config in force")
	require.NoError(t, rp.p.Reload(reloadConfig(t, rp, desktop.config), nil, "SIGHUP"))
	assert.Zero(t, notApplied(), "applied again")

	problems, err := testutil.CollectAndLint(rp.p.metrics, "cpupool_config_reload_not_applied")
	require.NoError(t, err)
	assert.Empty(t, problems)
}
