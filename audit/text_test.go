package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTextSummarisesThreadsByKind: a CPU that 300 host threads may run on,
// each with the same long reason, reads as one line per kind with its
// count and a few examples, not one line per thread; --json keeps every
// listed thread with its own reason (issue 43, item 5).
func TestTextSummarisesThreadsByKind(t *testing.T) {
	cpu := CPU{CPU: 5, Owner: "telco/dpdk/fwd", Pool: "exclusive", ForeignThreads: 300,
		ForeignKinds: map[string]int{ForeignCgroup: 290, ForeignOwnAffinity: 10}, UnboundKernelThreads: 40}
	for i := range defaultMaxThreads {
		kind, reason := ForeignCgroup, fmt.Sprintf("its cgroup /system.slice/s%d.service allows CPU 5 (CPUs 0-7): not confined", i)
		if i%10 == 9 {
			kind, reason = ForeignOwnAffinity, "its own affinity (5-6, narrower than its cgroup's CPUs 0-7) includes CPU 5"
		}
		cpu.Threads = append(cpu.Threads, Thread{PID: 100 + i, TID: 100 + i, Comm: fmt.Sprintf("d%d", i), Allowed: "0-7", Kind: kind, Reason: reason})
		cpu.KernelThreads = append(cpu.KernelThreads, Thread{PID: 10 + i, TID: 10 + i, Comm: "kworker", Allowed: "0-7", Kind: KernelManaged, Reason: "the kernel manages its affinity (PF_NO_SETAFFINITY)"})
	}
	judge(&cpu, true)
	rep := &Report{CPUs: []CPU{cpu}}

	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	out := text.String()
	assert.Contains(t, out, "  threads of other processes: 300\n"+
		"    290 cgroup: their cgroup allows it: not confined (housekeeping off for this pool, or systemd's API unreachable); e.g. 100/100 d0 (0-7), 101/101 d1 (0-7), 102/102 d2 (0-7)\n"+
		"    10 ownAffinity: their own affinity includes it (pinned to kept CPUs, or set since housekeeping's last pass); e.g. 109/109 d9 (0-7), 119/119 d19 (0-7)\n")
	assert.Contains(t, out, "  unbound kernel threads: 40 (by kind: the first 20)\n"+
		"    20 kernelManaged: the kernel manages their affinity (PF_NO_SETAFFINITY; workqueue workers follow the workqueue mask); e.g. 10/10 kworker (0-7), 11/11 kworker (0-7), 12/12 kworker (0-7)\n")
	assert.Contains(t, out, "each thread and its own reason: nri-cpupool audit --json\n")
	assert.NotContains(t, out, "s3.service", "a thread's own reason is in --json only")
	assert.Less(t, strings.Count(out, "\n"), 12, "a few lines, not one per thread:\n%s", out)

	data, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"reason":"its cgroup /system.slice/s3.service allows CPU 5 (CPUs 0-7): not confined"`)
	assert.Contains(t, string(data), `"foreignKinds":{"cgroup":290,"ownAffinity":10}`)
}
