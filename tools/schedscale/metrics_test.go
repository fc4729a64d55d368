package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scheduler's text exposition, as kube-scheduler 1.36 writes it: the
// series asked for are summed by their labels, the others skipped.
func TestParseMetrics(t *testing.T) {
	text := `# HELP scheduler_pending_pods [STABLE] Number of pending pods, by the queue type.
# TYPE scheduler_pending_pods gauge
scheduler_pending_pods{queue="active"} 12
scheduler_pending_pods{queue="unschedulable"} 1830
scheduler_pending_pods_other 5
scheduler_queue_incoming_pods_total{event="PodAdd",queue="active"} 2000
scheduler_queue_incoming_pods_total{event="ResourceClaimAdd",queue="active"} 7.5e+02
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 170
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1600
scheduler_schedule_attempts_total{profile="other",result="scheduled"} 3
process_start_time_seconds 1.7e+09
`
	m, err := parseMetrics(strings.NewReader(text), metricPending, metricIncoming, metricAttempts)
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"queue=active": 12, "queue=unschedulable": 1830}, m[metricPending])
	assert.Equal(t, map[string]float64{"event=PodAdd,queue=active": 2000, "event=ResourceClaimAdd,queue=active": 750}, m[metricIncoming])
	assert.Equal(t, 3.0, m[metricAttempts]["profile=other,result=scheduled"])
	assert.Equal(t, 1600.0, m[metricAttempts]["profile=default-scheduler,result=unschedulable"])

	_, err = parseMetrics(strings.NewReader(`scheduler_pending_pods{queue="active"} many`), metricPending)
	assert.ErrorContains(t, err, `metric line "scheduler_pending_pods{queue=\"active\"} many"`)

	assert.Equal(t, map[string]float64{"a": 2}, growth(map[string]float64{"a": 1, "b": 4}, map[string]float64{"a": 3, "b": 4}))
}

// cpuTime reads this process's own /proc/PID/stat: it grows with work.
func TestCPUTime(t *testing.T) {
	before := cpuTime(os.Getpid())
	require.Positive(t, before+1, "readable")
	deadline := time.Now().Add(300 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	assert.Greater(t, cpuTime(os.Getpid()), before)
	assert.Zero(t, cpuTime(0))
}
