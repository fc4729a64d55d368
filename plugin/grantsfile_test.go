package plugin

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
	"github.com/cpupool/nri-cpupool/state"
)

// grantsOnDisk reads the grants file as a restarted daemon would.
func grantsOnDisk(t *testing.T, path string) map[string]grant {
	t.Helper()
	g, err := loadGrants(path, time.Now())
	require.NoError(t, err)
	return g.byToken
}

// TestStaleGrantsTempsAreRemovedAtStart: temporary files a kill left in
// the middle of a write are removed when the daemon starts.
func TestStaleGrantsTempsAreRemovedAtStart(t *testing.T) {
	f := newFakeRuntime(t, false)
	dir := filepath.Dir(statePath(f))
	require.NoError(t, os.MkdirAll(dir, 0o700))
	stale := filepath.Join(dir, ".kubelet-grants-123")
	require.NoError(t, os.WriteFile(stale, []byte("{"), 0o600))
	startPlugin(t, f, desktopKubelet, statePath(f))
	assert.NoFileExists(t, stale)
}

// grantsInMemory copies the plugin's grants.
func grantsInMemory(p *Plugin) map[string]grant {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grants.snapshot().byToken
}

// setReplace swaps the grants file's writing step, as a test fault.
func setReplace(p *Plugin, replace func(path string, data []byte, durable bool) error) {
	f := p.grants.file
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replace = replace
}

func writeErrors(p *Plugin) float64 {
	return testutil.ToFloat64(metricNamed{p.metrics, "cpupool_state_write_errors_total"})
}

// TestCreateWithGrantDoesNotWriteTheGrantsFile: binding a grant to the
// container that shows it changes memory only. While the grants file cannot
// be replaced (a directory sits where it goes), the container is created
// and pinned, the failures are counted and retried, the state file is still
// written, and the grants file catches up once the fault clears.
func TestCreateWithGrantDoesNotWriteTheGrantsFile(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	path := GrantsFile(statePath(f))
	env := grantEnv(t, p, "6", "14")
	require.Len(t, grantsOnDisk(t, path), 1, "Grant wrote the file before returning the token")

	require.NoError(t, os.Remove(path))
	require.NoError(t, os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700))
	t.Cleanup(func() { // before the harness's final flush, should the test stop early
		if info, err := os.Stat(path); err == nil && info.IsDir() {
			os.RemoveAll(path)
		}
	})
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	ctr, resp, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err, "a grants file that cannot be written refuses nothing")
	assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	require.Eventually(t, func() bool { return writeErrors(p) >= 2 }, 10*time.Second, time.Millisecond, "failures are counted and retried")
	assert.Contains(t, rp.log.String(), "writing kubelet grants failed")
	st, err := state.ReadState(statePath(f))
	require.NoError(t, err)
	assert.Contains(t, st.Containers, ctr.Id, "the state file is written all the same")
	assert.Error(t, p.Flush(), "a flush reports the failure")

	require.NoError(t, os.RemoveAll(path))
	require.Eventually(t, func() bool {
		g, err := loadGrants(path, time.Now())
		return err == nil && len(g.byToken) == 1 && onlyGrant(g.byToken).Container == "app"
	}, 10*time.Second, 5*time.Millisecond, "the retry writes the binding once the fault clears")
	require.NoError(t, p.Flush())
	assert.Equal(t, grantsInMemory(p), grantsOnDisk(t, path))
	assert.Equal(t, grant{CPUs: "6,14", Seq: 1, PodUID: "uid-dpdk", Namespace: "telco", Pod: "dpdk", Container: "app"}, onlyGrant(grantsOnDisk(t, path)))
}

func onlyGrant(m map[string]grant) grant {
	for _, g := range m {
		return g
	}
	return grant{}
}

// TestHandlersDoNotWaitForABlockedGrantsWrite: with the grants file's write
// stuck (a stalled disk), containers showing grants are created, stopped
// and removed, and pods removed; the file catches up when the disk does.
// Grant alone waits: the kubelet must not get a token the daemon may forget.
func TestHandlersDoNotWaitForABlockedGrantsWrite(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	path := GrantsFile(statePath(f))
	envs := []string{grantEnv(t, p, "4"), grantEnv(t, p, "5"), grantEnv(t, p, "6")}

	entered, release := make(chan struct{}, 1), make(chan struct{})
	setReplace(p, func(path string, data []byte, durable bool) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return atomicfile.Replace(path, data, durable)
	})
	unblocked := false
	defer func() {
		if !unblocked {
			close(release)
		}
	}()
	first := f.runPod(podSpec{name: "first", namespace: "telco"})
	_, _, err := f.createWithEnv(first, "app", 0, envs[0])
	require.NoError(t, err)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never tried to write the binding")
	}
	// The writer is stuck in the grants write now.
	second := f.runPod(podSpec{name: "second", namespace: "telco"})
	ctr, resp, err := f.createWithEnv(second, "app", 0, envs[1])
	require.NoError(t, err)
	assert.Equal(t, "5", resp.Adjust.Linux.Resources.Cpu.Cpus)
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	f.removePod(second)
	third := f.runPod(podSpec{name: "third", namespace: "telco"})
	_, resp, err = f.createWithEnv(third, "app", 0, envs[2])
	require.NoError(t, err)
	assert.Equal(t, "6", resp.Adjust.Linux.Resources.Cpu.Cpus)
	for _, g := range grantsOnDisk(t, path) {
		assert.Empty(t, g.PodUID, "no binding reached the file while its write is stuck")
	}

	close(release)
	unblocked = true
	require.NoError(t, p.Flush())
	disk := grantsOnDisk(t, path)
	assert.Equal(t, grantsInMemory(p), disk)
	pods := map[string]bool{}
	for _, g := range disk {
		pods[g.Pod] = true
	}
	assert.Equal(t, map[string]bool{"first": true, "third": true}, pods, "bindings written, the removed pod's grant forgotten")
}

// TestGrantsFileFollowsMemory: with a writer that would wait an hour, the
// handlers' changes reach the grants file at Flush and at Close, and only
// then; Grant's own write is on disk when it returns.
func TestGrantsFileFollowsMemory(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPluginTuned(t, f, desktopKubelet, statePath(f), func(p *Plugin) { p.writer.delay = time.Hour })
	p := rp.p
	path := GrantsFile(statePath(f))

	a, b := grantEnv(t, p, "4", "12"), grantEnv(t, p, "5")
	assert.Equal(t, grantsInMemory(p), grantsOnDisk(t, path), "Grant writes before it returns")
	podA := f.runPod(podSpec{name: "a", namespace: "telco"})
	_, _, err := f.createWithEnv(podA, "app", 0, a)
	require.NoError(t, err)
	podB := f.runPod(podSpec{name: "b", namespace: "telco"})
	ctrB, _, err := f.createWithEnv(podB, "app", 0, b)
	require.NoError(t, err)
	for _, g := range grantsOnDisk(t, path) {
		assert.Empty(t, g.PodUID, "bindings are not written by the handler")
	}
	require.NoError(t, p.Flush())
	assert.Equal(t, grantsInMemory(p), grantsOnDisk(t, path), "Flush writes the bindings")
	assert.Len(t, grantsOnDisk(t, path), 2)

	f.stopContainer(ctrB)
	f.removeContainer(ctrB)
	f.removePod(podB)
	assert.Len(t, grantsOnDisk(t, path), 2, "forgetting is not written by the handler")
	require.NoError(t, p.Flush())
	assert.Equal(t, grantsInMemory(p), grantsOnDisk(t, path), "Flush writes the forgetting")
	assert.Len(t, grantsOnDisk(t, path), 1)

	c := grantEnv(t, p, "6")
	podC := f.runPod(podSpec{name: "c", namespace: "telco"})
	_, _, err = f.createWithEnv(podC, "app", 0, c)
	require.NoError(t, err)
	p.Close()
	disk := grantsOnDisk(t, path)
	assert.Equal(t, grantsInMemory(p), disk, "Close writes the last changes")
	assert.Equal(t, "c", disk[c[len(EnvGrant)+1:]].Pod)

	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	temps, err := filepath.Glob(path + ".tmp-*")
	require.NoError(t, err)
	assert.Empty(t, temps, "no temporary file is left behind")
}

// TestGrantsFileNeverGoesBack: copies taken in generation order and written
// in any order, durably (Grant) or not (the writer), leave the newest on
// disk, and no write ever replaces a newer map with an older one.
func TestGrantsFileNeverGoesBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet-grants.json")
	g, err := loadGrants(path, time.Now())
	require.NoError(t, err)
	var mu sync.Mutex // plays the plugin's lock
	var written []uint64
	g.file.replace = func(path string, data []byte, durable bool) error {
		var m map[string]grant
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		// Each copy holds one entry per generation up to its own.
		written = append(written, uint64(len(m)))
		time.Sleep(time.Duration(rand.Int64N(int64(200 * time.Microsecond))))
		return atomicfile.Replace(path, data, durable)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 25 {
				mu.Lock()
				g.byToken[newToken()] = grant{CPUs: strconv.Itoa(w)}
				g.changed()
				snap := g.snapshot()
				mu.Unlock()
				time.Sleep(time.Duration(rand.Int64N(int64(300 * time.Microsecond))))
				assert.NoError(t, g.file.save(snap, w%2 == 0))
			}
		})
	}
	wg.Wait()
	require.NotEmpty(t, written)
	for i := 1; i < len(written); i++ {
		require.Greater(t, written[i], written[i-1], "write %d carries generation %d after %d", i, written[i], written[i-1])
	}
	assert.Len(t, grantsOnDisk(t, path), 200, "the newest map is on disk")
	assert.Equal(t, uint64(200), written[len(written)-1])
}

// TestGrantRacingTheWriterKeepsItsToken: Grants race with the background
// writes that container creations and pod removals cause, each on CPUs of
// its own. When Grant returns, its token is on disk and stays there until
// memory drops it: no older map written afterwards removes it. At the end
// the file is memory.
func TestGrantRacingTheWriterKeepsItsToken(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPluginTuned(t, f, desktopKubelet, statePath(f), func(p *Plugin) { p.writer.delay, p.writer.minInterval = 0, 0 })
	p := rp.p
	path := GrantsFile(statePath(f))
	setReplace(p, func(path string, data []byte, durable bool) error {
		time.Sleep(time.Duration(rand.Int64N(int64(time.Millisecond)))) // widen the windows
		return atomicfile.Replace(path, data, durable)
	})
	var wg sync.WaitGroup
	for i, cpu := range []string{"4", "5", "12", "13"} {
		wg.Go(func() {
			for round := range 8 {
				env, err := p.Grant([]string{cpu})
				if !assert.NoError(t, err) {
					return
				}
				tok := env[EnvGrant]
				assert.Contains(t, grantsOnDisk(t, path), tok, "on disk when Grant returns")
				pod := f.runPod(podSpec{name: "race" + id(i*100+round), namespace: "telco"})
				ctr, resp, err := f.createWithEnv(pod, "app", 0, EnvGrant+"="+tok)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, cpu, resp.Adjust.Linux.Resources.Cpu.Cpus)
				assert.Contains(t, grantsOnDisk(t, path), tok, "still on disk while its container runs")
				f.stopContainer(ctr)
				f.removeContainer(ctr)
				f.removePod(pod)
			}
		})
	}
	wg.Wait()
	require.NoError(t, p.Flush())
	assert.Equal(t, grantsInMemory(p), grantsOnDisk(t, path))
	assert.Empty(t, grantsOnDisk(t, path), "every pod was removed")
}

// TestFailedGrantWriteTakesTheTokenBack: Grant fails when its write fails,
// and the token it did not return is forgotten, in memory and on disk.
func TestFailedGrantWriteTakesTheTokenBack(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	setReplace(p, func(string, []byte, bool) error { return errors.New("read-only file system") })
	_, err := p.Grant([]string{"4"})
	require.ErrorContains(t, err, "saving kubelet grants: read-only file system")
	assert.Empty(t, grantsInMemory(p))
	setReplace(p, atomicfile.Replace)
	require.NoError(t, p.Flush())
	assert.Empty(t, grantsOnDisk(t, filepath.Join(filepath.Dir(statePath(f)), "kubelet-grants.json")))
}

// TestKillBeforeTheGrantsWriteLosesNoContainer: killed after replying and
// before the writer recorded what the handlers did to the grants, the
// daemon restarts from the grants Grant wrote. The runtime is the truth:
// Synchronize finds the running container with its token, binds the grant
// to it again and keeps it where it runs; the kubelet's re-creation of that
// container with the same token is admitted, another container's use of it
// refused. A pod removed before the kill leaves its grant, unbound on
// disk, kept until the kubelet allocates its CPUs again.
func TestKillBeforeTheGrantsWriteLosesNoContainer(t *testing.T) {
	f := newFakeRuntime(t, false)
	path := GrantsFile(statePath(f))
	first := startPluginTuned(t, f, desktopKubelet, statePath(f), func(p *Plugin) { p.writer.delay = time.Hour })
	env, gone := grantEnv(t, first.p, "6", "14"), grantEnv(t, first.p, "5")
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	ctr, resp, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	require.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	old := f.runPod(podSpec{name: "old", namespace: "telco"})
	oldCtr, _, err := f.createWithEnv(old, "app", 0, gone)
	require.NoError(t, err)
	f.stopContainer(oldCtr)
	f.removeContainer(oldCtr)
	f.removePod(old)
	disk := grantsOnDisk(t, path)
	require.Len(t, disk, 2, "the file has what Grant wrote, not what the handlers did since")
	for _, g := range disk {
		require.Empty(t, g.PodUID)
	}
	_, err = os.Stat(statePath(f))
	require.ErrorIs(t, err, os.ErrNotExist, "nor is there a state file yet")
	before := runtimeCPUs(f)
	first.kill()

	second := startPlugin(t, f, desktopKubelet, statePath(f))
	assert.Equal(t, before, runtimeCPUs(f), "every container stays where it runs")
	assert.Equal(t, "exclusive", poolOf(second.p, ctr.Id))
	assertEveryCPUAccounted(t, f, second.p)
	tok := env[len(EnvGrant)+1:]
	mem := grantsInMemory(second.p)
	assert.Equal(t, grant{CPUs: "6,14", Seq: 1, PodUID: "uid-dpdk", Namespace: "telco", Pod: "dpdk", Container: "app"}, mem[tok], "bound again to the container that shows it")
	assert.Len(t, mem, 2, "the removed pod's grant is unbound, so kept until the kubelet reallocates its CPUs")

	// The kubelet re-creates the container from its checkpointed allocation.
	f.stopContainer(ctr)
	f.removeContainer(ctr)
	_, resp, err = f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err, "the re-created container is admitted")
	assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
	other := f.runPod(podSpec{name: "other", namespace: "telco"})
	_, _, err = f.createWithEnv(other, "app", 0, env)
	require.ErrorContains(t, err, "the grant belongs to container telco/dpdk/app")
	require.NoError(t, second.p.Flush())
	assert.Equal(t, grantsInMemory(second.p), grantsOnDisk(t, path), "the file catches up")
}

// TestKillBetweenTheStateWriteAndTheGrantsWrite: the state file records a
// container of the resource, the grants file does not record its binding
// yet, and the daemon is killed. Synchronize binds the token to the running
// container again, so a tenant who hands the token to another pod gets it
// refused; the owner restarts normally; and when the owner's pod ends the
// token goes with it instead of letting the other pod run on CPUs the
// kubelet never allocated to it.
func TestKillBetweenTheStateWriteAndTheGrantsWrite(t *testing.T) {
	f := newFakeRuntime(t, false)
	path := GrantsFile(statePath(f))
	first := startPlugin(t, f, desktopKubelet, statePath(f))
	env := grantEnv(t, first.p, "6", "14")
	tok := env[len(EnvGrant)+1:]
	setReplace(first.p, func(string, []byte, bool) error { return errors.New("disk full") })
	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
	ctr, _, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err)
	require.Error(t, first.p.Flush(), "the grants write fails after the state write")
	st, err := state.ReadState(statePath(f))
	require.NoError(t, err)
	require.Contains(t, st.Containers, ctr.Id, "the state file has the container")
	require.Empty(t, grantsOnDisk(t, path)[tok].PodUID, "the grants file has the token unbound")
	first.kill()

	second := startPlugin(t, f, desktopKubelet, statePath(f))
	assert.Equal(t, grant{CPUs: "6,14", Seq: 1, PodUID: "uid-dpdk", Namespace: "telco", Pod: "dpdk", Container: "app"}, grantsInMemory(second.p)[tok],
		"Synchronize binds the running container's token again")
	other := f.runPod(podSpec{name: "other", namespace: "telco"})
	_, _, err = f.createWithEnv(other, "app", 0, env)
	require.ErrorContains(t, err, "the grant belongs to container telco/dpdk/app")

	f.exitContainer(ctr, 1)
	f.removeContainer(ctr)
	_, resp, err := f.createWithEnv(pod, "app", 0, env)
	require.NoError(t, err, "the owner's restart is admitted")
	assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)

	f.removePod(pod)
	_, _, err = f.createWithEnv(other, "app", 0, env)
	require.ErrorContains(t, err, "unknown grant token", "the token ended with its pod")
	assert.Empty(t, grantsInMemory(second.p))
}

// TestDamagedGrantsFileIsMovedAside: a grants file torn by a power loss
// (or emptied, or edited by hand) does not stop the daemon: it is moved
// aside, logged and counted, as a damaged state file is, and the grants of
// the containers that run are made again from the runtime, so that their
// restarts are admitted and their tokens stay theirs. Background writes of
// the grants file are durable, so that a power loss cannot tear it.
func TestDamagedGrantsFileIsMovedAside(t *testing.T) {
	for _, damage := range []string{"", "{\"3b2a", "null", `{"x": {"cpus": "not-a-list"}}`} {
		t.Run(strconv.Quote(damage), func(t *testing.T) {
			f := newFakeRuntime(t, false)
			path := GrantsFile(statePath(f))
			first := startPlugin(t, f, desktopKubelet, statePath(f))
			var durable []bool
			var mu sync.Mutex
			setReplace(first.p, func(path string, data []byte, d bool) error {
				mu.Lock()
				durable = append(durable, d)
				mu.Unlock()
				return atomicfile.Replace(path, data, d)
			})
			env := grantEnv(t, first.p, "6", "14")
			pending := grantEnv(t, first.p, "7") // no container shows it before the damage
			pod := f.runPod(podSpec{name: "dpdk", namespace: "telco"})
			ctr, _, err := f.createWithEnv(pod, "app", 0, env)
			require.NoError(t, err)
			require.NoError(t, first.p.Flush())
			mu.Lock()
			assert.Equal(t, []bool{true, true, true}, durable, "Grant's writes and the writer's are all durable")
			mu.Unlock()
			first.kill()
			require.NoError(t, os.WriteFile(path, []byte(damage), 0o600))

			second := startPlugin(t, f, desktopKubelet, statePath(f))
			assert.Contains(t, second.log.String(), "kubelet grants file discarded")
			aside, err := filepath.Glob(path + ".corrupt-*")
			require.NoError(t, err)
			require.Len(t, aside, 1, "moved aside")
			kept, err := os.ReadFile(aside[0])
			require.NoError(t, err)
			assert.Equal(t, damage, string(kept))
			assert.Equal(t, 1.0, testutil.ToFloat64(second.p.metrics.discarded.WithLabelValues("kubelet-grants")))
			tok := env[len(EnvGrant)+1:]
			assert.Equal(t, map[string]grant{tok: {CPUs: "6,14", Seq: 1, PodUID: "uid-dpdk", Namespace: "telco", Pod: "dpdk", Container: "app"}},
				grantsInMemory(second.p), "the running container's grant is made again from the runtime")
			require.NoError(t, second.p.Flush())
			assert.Equal(t, grantsInMemory(second.p), grantsOnDisk(t, path), "and written")

			other := f.runPod(podSpec{name: "other", namespace: "telco"})
			_, _, err = f.createWithEnv(other, "app", 0, env)
			require.ErrorContains(t, err, "the grant belongs to container telco/dpdk/app")
			_, _, err = f.createWithEnv(other, "app", 0, pending)
			require.ErrorContains(t, err, "unknown grant token", "an allocation no container had shown is lost with the file")
			f.exitContainer(ctr, 1)
			f.removeContainer(ctr)
			_, resp, err := f.createWithEnv(pod, "app", 0, env)
			require.NoError(t, err, "the owner's restart is admitted")
			assert.Equal(t, "6,14", resp.Adjust.Linux.Resources.Cpu.Cpus)
		})
	}
}
