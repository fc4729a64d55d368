package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/state"
)

// poweredDesktop is the desktop (siblings N and N+8, intel_pstate without
// EPP, intel_idle with POLL, C1, C6, C10) with power classes: exclusive
// containers get low-latency or choose turbo, idle exclusive CPUs and
// infra save power, the shared pool is in between.
var poweredDesktop = testNode{fixture: desktop.fixture, config: desktop.config + `
power:
  classes:
    low-latency: {resumeLatencyUS: n/a, disabledIdleStates: [C6, C10], governor: performance, minFreqKHz: max}
    turbo: {governor: performance, minFreqKHz: base, maxFreqKHz: max}
    saver: {resumeLatencyUS: 200, maxFreqKHz: base}
    balanced: {resumeLatencyUS: 50}
  pools:
    exclusive: {class: low-latency, allowed: [turbo], idleClass: saver}
    shared: {class: balanced}
    infra: {class: saver}
`}

// cpuFiles reads a CPU's power files as the kernel shows them.
func cpuFiles(t *testing.T, f *fakeRuntime, shape string, cpu int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rel := range []string{"power/pm_qos_resume_latency_us", "cpuidle/state2/disable", "cpuidle/state3/disable",
		"cpufreq/scaling_governor", "cpufreq/scaling_min_freq", "cpufreq/scaling_max_freq"} {
		data, err := os.ReadFile(filepath.Join(f.sysfsRoot(shape), "sys/devices/system/cpu", fmt.Sprintf("cpu%d", cpu), rel))
		if err == nil {
			out[rel] = strings.TrimSpace(string(data))
		}
	}
	return out
}

// The desktop's CPUs as booted, and as each class makes them.
var (
	bootedCPU = map[string]string{"power/pm_qos_resume_latency_us": "0", "cpuidle/state2/disable": "0", "cpuidle/state3/disable": "0",
		"cpufreq/scaling_governor": "powersave", "cpufreq/scaling_min_freq": "800000", "cpufreq/scaling_max_freq": "5000000"}
	saverCPU      = with(bootedCPU, "power/pm_qos_resume_latency_us", "200", "cpufreq/scaling_max_freq", "3600000")
	balancedCPU   = with(bootedCPU, "power/pm_qos_resume_latency_us", "50")
	lowLatencyCPU = with(bootedCPU, "power/pm_qos_resume_latency_us", "n/a", "cpuidle/state2/disable", "1", "cpuidle/state3/disable", "1",
		"cpufreq/scaling_governor", "performance", "cpufreq/scaling_min_freq", "5000000")
	turboCPU = with(bootedCPU, "cpufreq/scaling_governor", "performance", "cpufreq/scaling_min_freq", "3600000")
)

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// requireClass checks every CPU of cpus against a class's files.
func requireClass(t *testing.T, f *fakeRuntime, cpus cpuset.CPUSet, want map[string]string, what string) {
	t.Helper()
	for _, cpu := range cpus.List() {
		require.Equal(t, want, cpuFiles(t, f, desktop.fixture, cpu), "CPU %d: %s", cpu, what)
	}
}

// slowPasses keeps the reconciler from passing on its own: only
// FlushIsolation passes, so a test sees what a reply alone changed.
func slowPasses(p *Plugin) {
	p.isolationTiming = hostfiles.Timing{Delay: time.Hour, MinInterval: time.Hour, Rescan: time.Hour, BackoffInitial: time.Hour, BackoffMax: time.Hour}
}

// TestPowerClassesFollowContainers, over the real NRI protocol: every CPU
// gets its pool's class from the first Synchronize; an exclusive container
// gets its pool's class or the one it chooses, written after the reply,
// kept while its CPUs are held for its stopped run, and back to the idle
// class when its pod ends. What a class does not set is the CPU's
// original (turbo leaves the resume latency alone: the idle class's 200
// goes back to the original 0).
func TestPowerClassesFollowContainers(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, poweredDesktop, statePath(f), slowPasses)
	require.NoError(t, rp.p.FlushIsolation())
	requireClass(t, f, cpuset.New(0, 1, 8, 9, 4, 5, 6, 7, 12, 13, 14, 15), saverCPU, "infra and idle exclusive CPUs")
	requireClass(t, f, cpuset.New(2, 3, 10, 11), balancedCPU, "shared")

	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "power-class.cpupool.dev/container.fwd": "turbo"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	ctl, _, err := f.createContainer(pod, "ctl", 1000)
	require.NoError(t, err)
	turbo, lowLatency := cpusOf(t, f, f.cpus(fwd)), cpusOf(t, f, f.cpus(ctl))
	requireClass(t, f, turbo.Union(lowLatency), saverCPU, "the replies wrote nothing")

	require.NoError(t, rp.p.FlushIsolation())
	requireClass(t, f, turbo, turboCPU, "the container's choice")
	requireClass(t, f, lowLatency, lowLatencyCPU, "the pool's class")
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_power_cpus CPUs of each power class, as of the last pass over the host files.
# TYPE cpupool_power_cpus gauge
cpupool_power_cpus{class="balanced"} 4
cpupool_power_cpus{class="low-latency"} 1
cpupool_power_cpus{class="saver"} 9
cpupool_power_cpus{class="turbo"} 2
`), "cpupool_power_cpus"))
	st := rp.savedState(t)
	assert.Equal(t, "turbo", st.Containers[fwd.Id].PowerClass)
	assert.Equal(t, turbo.String(), st.PowerClasses["turbo"])

	f.exitContainer(fwd, 1)
	require.NoError(t, rp.p.FlushIsolation())
	requireClass(t, f, turbo, turboCPU, "held for the pod: the class stays")

	f.removePod(pod)
	require.NoError(t, rp.p.FlushIsolation())
	requireClass(t, f, turbo.Union(lowLatency), saverCPU, "released: the idle class")
}

// TestPowerRestoredAfterKillBeforeStateWrite: the plugin dies after the
// pass changed a container's CPUs and before its state file recorded the
// container. The next one finds it through the runtime (or not) and
// keeps its class (from its annotation) or puts the idle class back; a
// plugin started without power classes puts every file back exactly as
// the node booted.
func TestPowerRestoredAfterKillBeforeStateWrite(t *testing.T) {
	for _, podEnds := range []bool{true, false} {
		t.Run(fmt.Sprintf("pod ends while away: %v", podEnds), func(t *testing.T) {
			f := newFakeRuntime(t, false)
			first := startPluginTuned(t, f, poweredDesktop, statePath(f), func(p *Plugin) {
				slowPasses(p)
				p.writer.delay = time.Hour
			})
			pod := f.runPod(podSpec{name: "rt", namespace: "telco", annotations: map[string]string{
				"pool.cpupool.dev": "exclusive", "power-class.cpupool.dev": "turbo"}})
			ctr, _, err := f.createContainer(pod, "loop", 2000)
			require.NoError(t, err)
			require.NoError(t, first.p.FlushIsolation())
			mine := cpusOf(t, f, f.cpus(ctr))
			requireClass(t, f, mine, turboCPU, "applied")
			_, err = state.ReadState(statePath(f))
			require.Error(t, err, "no state file yet")
			first.kill()
			if podEnds {
				f.removeContainer(ctr)
				f.removePod(pod)
			}

			second := startPlugin(t, f, poweredDesktop, statePath(f))
			require.NoError(t, second.p.FlushIsolation())
			if podEnds {
				requireClass(t, f, mine, saverCPU, "nobody holds them: the idle class, from the originals")
			} else {
				assert.Equal(t, f.cpus(ctr), mine.String(), "the container stays")
				requireClass(t, f, mine, turboCPU, "its class, from its annotation")
			}
			second.stop()

			third := startPlugin(t, f, desktop, statePath(f))
			require.NoError(t, third.p.FlushIsolation())
			requireClass(t, f, cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), bootedCPU, "no classes: as booted")
			records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(statePath(f)), "")
			require.NoError(t, err)
			assert.Empty(t, records)
		})
	}
}

// vmPowered is the 2-vCPU VM (the PM QoS file only) with a class that
// also wants what the VM lacks.
var vmPowered = testNode{fixture: "vm-2cpu", config: `
isolatedCPUs: "1"
pools:
  exclusive: {cpus: "1"}
power:
  classes:
    low-latency: {resumeLatencyUS: "10", governor: performance, disabledIdleStates: [C6]}
  pools:
    exclusive: {class: low-latency}
`}

// TestPowerUnsupportedSettings: on a VM without cpufreq and cpuidle the
// container starts with what exists (the resume latency), the plugin warns
// once per setting at start and once per pass's finding, and the metrics
// count what is missing. With power.unsupported: refuse the container is
// refused, saying what the node lacks.
func TestPowerUnsupportedSettings(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, vmPowered, statePath(f))
	pod := f.runPod(podSpec{name: "rt", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err := f.createContainer(pod, "loop", 1000)
	require.NoError(t, err)
	require.NoError(t, rp.p.FlushIsolation())
	require.NoError(t, rp.p.FlushIsolation())
	qos, err := os.ReadFile(filepath.Join(f.sysfsRoot("vm-2cpu"), "sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"))
	require.NoError(t, err)
	assert.Equal(t, "10", strings.TrimSpace(string(qos)))
	log := rp.log.String()
	assert.Contains(t, log, "config: warning: power.classes.low-latency.governor: no cpufreq (no frequency scaling driver: a VM, or none loaded) on CPUs 0-1 of this node; containers of the class start without it (power.unsupported: warn)")
	assert.Equal(t, 1, strings.Count(log, "governor: no cpufreq"), "once, at start, not again at each pass:\n%s", log)
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(`
# HELP cpupool_power_settings Settings of each power class (one file of one CPU, cpufreq policy or uncore die) as of the last pass: applied (written or already so), refused (the kernel refused it; not retried while wanted), unsupported (this node lacks it: one per CPU).
# TYPE cpupool_power_settings gauge
cpupool_power_settings{class="low-latency",result="applied"} 1
cpupool_power_settings{class="low-latency",result="refused"} 0
cpupool_power_settings{class="low-latency",result="unsupported"} 2
`), "cpupool_power_settings"))

	g := newFakeRuntime(t, false)
	refusing := testNode{fixture: vmPowered.fixture, config: vmPowered.config + "  unsupported: refuse\n"}
	rg := startPlugin(t, g, refusing, statePath(g))
	pod = g.runPod(podSpec{name: "rt", annotations: map[string]string{"pool.cpupool.dev": "exclusive"}})
	_, _, err = g.createContainer(pod, "loop", 1000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nri-cpupool: container default/rt/loop: the power class low-latency of pool exclusive (power.pools.exclusive.class) cannot be applied on this node: disabledIdleStates: no cpuidle")
	assert.Equal(t, 1.0, testutil.ToFloat64(rg.p.metrics.refused.WithLabelValues("power")))
}

// TestPowerClassAnnotationRefused: a class the pool does not offer is an
// error the tenant sees, naming what it offers; nothing is placed.
func TestPowerClassAnnotationRefused(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, poweredDesktop, statePath(f))
	pod := f.runPod(podSpec{name: "p", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "power-class.cpupool.dev": "saver"}})
	_, _, err := f.createContainer(pod, "c", 1000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `annotation power-class.cpupool.dev="saver": pool exclusive offers the power classes low-latency, turbo (power.pools.exclusive)`)
	assert.Equal(t, 8, usageOf(rp.p, "exclusive").Free)
}
