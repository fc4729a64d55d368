package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsFollowDecisions: the pool gauges and the refusal counter
// follow the decisions. Every refusal reason is exported from the start,
// at 0 (review 59b, M2): a reason's first refusal is then an increase the
// refusal alerts see.
func TestMetricsFollowDecisions(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktop, statePath(f))
	pod := f.runPod(podSpec{name: "m", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/container.x": "exclusive", "pool.cpupool.dev/container.z": "exclusive", "pool.cpupool.dev/container.e": "exclusive-non-isolcpus"}})
	x, _, err := f.createContainer(pod, "x", 3000)
	require.NoError(t, err)
	f.exitContainer(x, 1)
	_, _, err = f.createContainer(pod, "z", 2000)
	require.NoError(t, err)
	_, _, err = f.createContainer(pod, "e", 1000)
	require.NoError(t, err)
	_, _, err = f.createContainer(pod, "y", 0) // infra
	require.NoError(t, err)
	bad := f.runPod(podSpec{name: "bad", annotations: map[string]string{"pool.cpupool.dev": "nope"}})
	_, _, err = f.createContainer(bad, "c", 1000)
	require.Error(t, err)

	want := `
# HELP cpupool_pool_cpus CPUs in the pool now (infra shrinks while exclusive-non-isolcpus containers run).
# TYPE cpupool_pool_cpus gauge
cpupool_pool_cpus{pool="exclusive"} 8
cpupool_pool_cpus{pool="exclusive-non-isolcpus"} 2
cpupool_pool_cpus{pool="infra"} 3
cpupool_pool_cpus{pool="shared"} 4
# HELP cpupool_pool_free_cpus CPUs of an exclusive pool that no container holds.
# TYPE cpupool_pool_free_cpus gauge
cpupool_pool_free_cpus{pool="exclusive"} 3
cpupool_pool_free_cpus{pool="exclusive-non-isolcpus"} 1
# HELP cpupool_held_cpus CPUs of an exclusive pool held for stopped containers until their pod's sandbox stops.
# TYPE cpupool_held_cpus gauge
cpupool_held_cpus{pool="exclusive"} 3
cpupool_held_cpus{pool="exclusive-non-isolcpus"} 0
# HELP cpupool_containers Containers assigned to the pool.
# TYPE cpupool_containers gauge
cpupool_containers{pool="exclusive"} 1
cpupool_containers{pool="exclusive-non-isolcpus"} 1
cpupool_containers{pool="infra"} 1
cpupool_containers{pool="shared"} 0
# HELP cpupool_refused_containers_total Container creations refused, by reason (annotation, namespace, grant, claim, placement, power), and running containers Synchronize could not place and confined to infra (synchronize).
# TYPE cpupool_refused_containers_total counter
cpupool_refused_containers_total{reason="annotation"} 1
cpupool_refused_containers_total{reason="claim"} 0
cpupool_refused_containers_total{reason="grant"} 0
cpupool_refused_containers_total{reason="namespace"} 0
cpupool_refused_containers_total{reason="placement"} 0
cpupool_refused_containers_total{reason="power"} 0
cpupool_refused_containers_total{reason="synchronize"} 0
`
	// The pool figures are published by the state writer, milliseconds
	// after the decisions; a flush makes that now.
	require.NoError(t, rp.p.Flush())
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(want),
		"cpupool_pool_cpus", "cpupool_pool_free_cpus", "cpupool_held_cpus", "cpupool_containers", "cpupool_refused_containers_total"))
	writer := `
# HELP cpupool_state_write_errors_total Failed attempts to write or sync the state file or the kubelet grants file (each is retried; the log names the file).
# TYPE cpupool_state_write_errors_total counter
cpupool_state_write_errors_total 0
# HELP cpupool_state_behind_seconds Seconds the oldest decision not yet in the state file has waited; 0 when the file is current.
# TYPE cpupool_state_behind_seconds gauge
cpupool_state_behind_seconds 0
`
	require.NoError(t, testutil.GatherAndCompare(rp.p.Registry(), strings.NewReader(writer),
		"cpupool_state_write_errors_total", "cpupool_state_behind_seconds"))
	assert.Positive(t, testutil.ToFloat64(metricNamed{rp.p.metrics, "cpupool_state_writes_total"}), "the state was written")
	assert.Less(t, testutil.ToFloat64(metricNamed{rp.p.metrics, "cpupool_state_last_write_age_seconds"}), 60.0)
	n, err := testutil.GatherAndCount(rp.p.Registry(), "process_resident_memory_bytes")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "process metrics are served too")
}

// TestScrapeNeverWaitsForTheLock scrapes while a handler holds the plugin's
// lock: the metrics read the last published usage, so the scrape returns.
func TestScrapeNeverWaitsForTheLock(t *testing.T) {
	p := newUnitPlugin(t, &failingStore{}, `isolatedCPUs: "4-7,12-15"`)
	p.mu.Lock()
	defer p.mu.Unlock()
	done := make(chan int, 1)
	go func() {
		n, _ := testutil.GatherAndCount(p.Registry(), "cpupool_pool_cpus")
		done <- n
	}()
	select {
	case n := <-done:
		assert.Equal(t, 4, n, "one figure per pool")
	case <-time.After(10 * time.Second):
		t.Fatal("a scrape waited for the plugin's lock")
	}
}

// TestRefusalsAreCountedByTheirReason: each kind of refused creation is
// counted under its own reason and reaches the runtime in one form; a
// namespace that may not use the exclusive pool it gets through the
// kubelet's resource counts as namespace, not annotation.
func TestRefusalsAreCountedByTheirReason(t *testing.T) {
	f := newFakeRuntime(t, false)
	rp := startPlugin(t, f, desktopKubelet, statePath(f))
	p := rp.p
	refused := func(reason string) float64 { return testutil.ToFloat64(p.metrics.refused.WithLabelValues(reason)) }
	tests := []struct {
		name, namespace string
		annotations     map[string]string
		env             string
		milli           int64
		reason, says    string
	}{
		{"bad annotation", "telco", map[string]string{"pool.cpupool.dev": "nope"}, "", 1000,
			"annotation", `nri-cpupool: container telco/bad-annotation/c: annotation pool.cpupool.dev="nope": unknown pool`},
		{"namespace by annotation", "web", map[string]string{"pool.cpupool.dev": "exclusive"}, "", 1000,
			"annotation", `nri-cpupool: container web/namespace-by-annotation/c: annotation pool.cpupool.dev="exclusive": namespace "web" may not use pool exclusive`},
		{"namespace by resource", "web", nil, grantEnv(t, p, "4"), 0,
			"namespace", `nri-cpupool: container web/namespace-by-resource/c: namespace "web" may not use pool exclusive (allowedNamespaces.exclusive: [telco])`},
		{"unknown grant", "telco", nil, EnvGrant + "=0123456789abcdef0123456789abcdef", 0,
			"grant", "nri-cpupool: container telco/unknown-grant/c: CPUPOOL_GRANT: unknown grant token"},
		{"pool full", "telco", map[string]string{"pool.cpupool.dev": "exclusive-non-isolcpus"}, "", 64000,
			"placement", "nri-cpupool: pool exclusive-non-isolcpus cannot fit container telco/pool-full/c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]float64{}
			for _, r := range []string{"annotation", "namespace", "grant", "placement"} {
				before[r] = refused(r)
			}
			pod := f.runPod(podSpec{name: strings.ReplaceAll(tc.name, " ", "-"), namespace: tc.namespace, annotations: tc.annotations})
			var err error
			if tc.env != "" {
				_, _, err = f.createWithEnv(pod, "c", tc.milli, tc.env)
			} else {
				_, _, err = f.createContainer(pod, "c", tc.milli)
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.says)
			for r, n := range before {
				want := n
				if r == tc.reason {
					want++
				}
				assert.Equal(t, want, refused(r), "reason %s", r)
			}
		})
	}
}

// TestHostFilesChangedHelpNamesEveryOwner: the help of
// cpupool_host_files_changed names every owner the collector labels
// (review 58, item 14: it lacked rps and workqueues).
func TestHostFilesChangedHelpNamesEveryOwner(t *testing.T) {
	ch := make(chan *prometheus.Desc, 16)
	newIsolationMetrics(nil).Describe(ch)
	close(ch)
	var help string
	for d := range ch {
		if strings.Contains(d.String(), `fqName: "cpupool_host_files_changed"`) {
			help = d.String()
		}
	}
	require.NotEmpty(t, help)
	assert.Contains(t, help, "by owner (irq, cpuset, power, housekeeping, rps, workqueues).")
}
