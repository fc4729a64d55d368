package e2e

// Not tagged e2e: the noise harness's trace reading needs no root and no
// kernel, only its text.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The workqueue events as the kernel prints them (include/trace/events/
// workqueue.h, the same in 6.1 and 6.12): the probe CPU's instance has the
// work items run there among its sched_switch events; the queueing
// instance, every CPU's queueing for that CPU, the queuer's name with a
// space in it too (a comm may have one).
const (
	noiseRunTrace = `# tracer: nop
#
     kworker/4:2-123     [004] d..2.   100.000001: sched_switch: prev_comm=swapper/4 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=kworker/4:2 next_pid=123 next_prio=120
     kworker/4:2-123     [004] .....   100.000002: workqueue_execute_start: work struct 00000000a1b2c3d4: function vmstat_update
   kworker/u34:1-77      [004] .....   100.000003: workqueue_execute_start: work struct 00000000a1b2c3d5: function lru_add_drain_per_cpu
     kworker/4:2-123     [004] .....   100.500004: workqueue_execute_start: work struct 00000000a1b2c3d4: function vmstat_update
`
	noiseQueueTrace = `# tracer: nop
#
          <idle>-0       [004] d.s2.   100.000001: workqueue_queue_work: work struct=00000000a1b2c3d4 function=vmstat_update workqueue=mm_percpu_wq req_cpu=4 cpu=4
          <idle>-0       [004] d.s2.   100.500001: workqueue_queue_work: work struct=00000000a1b2c3d4 function=vmstat_update workqueue=mm_percpu_wq req_cpu=4 cpu=4
    stress-ng-vm-456     [000] .....   100.000002: workqueue_queue_work: work struct=00000000a1b2c3d5 function=lru_add_drain_per_cpu workqueue=mm_percpu_wq req_cpu=4 cpu=4
 containerd shim-789     [001] .....   100.000003: workqueue_queue_work: work struct=00000000a1b2c3d6 function=flush_memcg_stats_dwork workqueue=events req_cpu=8192 cpu=4
`
)

// TestNoiseWorkItems: the harness names what a kworker/N switch on the
// probe's CPU was for (issue 42: 6.12's kworker/4:2): the work functions
// run there by count, and who queued work for that CPU, from which CPU.
func TestNoiseWorkItems(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "w")
	require.NoError(t, os.WriteFile(out+".trace", []byte(noiseRunTrace), 0o644))
	require.NoError(t, os.WriteFile(out+".wqtrace", []byte(noiseQueueTrace), 0o644))
	cmd := exec.Command("bash", "-c", `source "$1" && noise_work "$2" && noise_works "$2" && echo && noise_queuers "$2"`,
		"bash", "../vm/noise.sh", out)
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", got)

	work, err := os.ReadFile(out + ".work")
	require.NoError(t, err)
	assert.Equal(t, "vmstat_update(kworker/4:2) 2\nlru_add_drain_per_cpu(kworker/u34:1) 1\n", string(work),
		"the work items run on the CPU, most first, with the kworker that ran each (the CPU's own pool, an unbound one)")
	queued, err := os.ReadFile(out + ".queued")
	require.NoError(t, err)
	assert.Equal(t, "vmstat_update mm_percpu_wq <idle> 4 2\n", firstLine(string(queued)), "its own timer's vmstat work, queued on the CPU itself")
	assert.Contains(t, string(queued), "lru_add_drain_per_cpu mm_percpu_wq stress-ng-vm 0 1\n", "a drain queued from CPU 0")
	assert.Contains(t, string(queued), "flush_memcg_stats_dwork events containerd_shim 1 1\n", "a queuer's name with a space")
	assert.True(t, strings.HasPrefix(string(got), "vmstat_update(kworker/4:2)×2, lru_add_drain_per_cpu(kworker/u34:1)×1\nvmstat_update@mm_percpu_wq×2 (<idle>, CPU 4), "),
		"the report's lines: %q", got)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line + "\n"
}
