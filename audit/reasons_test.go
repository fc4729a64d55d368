package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// TestForeignReasons: after housekeeping confined system.slice to CPUs
// 0-1, the threads still allowed on held CPU 2 are each said why: a
// process that set its own affinity in a cgroup not confined, one in a
// cgroup not confined, one in the root cgroup, one whose cgroup's CPUs
// cannot be read; the unbound kernel threads are listed with theirs (a
// workqueue worker the kernel manages, one housekeeping has not narrowed,
// one whose narrowing the kernel refused), and the per-CPU ones only
// counted. A confined daemon is not foreign.
func TestForeignReasons(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	m.spec.Processes = append(m.spec.Processes,
		procfixture.Process{PID: 400, Comm: "sshd", AllowedCPUs: cpuset.New(0, 1), Cgroup: "0::/system.slice/ssh.service"},
		procfixture.Process{PID: 401, Comm: "loop", AllowedCPUs: cpuset.New(2), Cgroup: "0::/user.slice/session-1.scope"},
		procfixture.Process{PID: 402, Comm: "bash", AllowedCPUs: all, Cgroup: "0::/user.slice/session-1.scope"},
		procfixture.Process{PID: 403, Comm: "busybox-init", AllowedCPUs: all, Cgroup: "0::/"},
		procfixture.Process{PID: 404, Comm: "agent", AllowedCPUs: all, Cgroup: "0::/machine.slice/agent.scope"},
		procfixture.Process{PID: 90, Comm: "kworker/u16:1-events_unbound", Kernel: true, NoSetAffinity: true, AllowedCPUs: all, Cgroup: "0::/"},
		procfixture.Process{PID: 24, Comm: "migration/2", Kernel: true, NoSetAffinity: true, AllowedCPUs: cpuset.New(2), Cgroup: "0::/"},
		procfixture.Process{PID: 91, Comm: "rcu_preempt", Kernel: true, AllowedCPUs: all, Cgroup: "0::/"},
	)
	procfixture.Write(t, m.proc, m.spec)
	m.cgroupCPUs(t, "/system.slice/ssh.service", cpuset.New(0, 1))
	m.cgroupCPUs(t, "/user.slice/session-1.scope", all)

	opt := m.options(m.fire(t, nil))
	opt.Refused["/affinity/91/17"] = "write /affinity/91/17: invalid argument"
	rep, err := Gather(holdings[:1], opt)
	require.NoError(t, err)
	c2 := rep.CPUs[0]
	require.Equal(t, 2, c2.CPU)
	assert.False(t, c2.Clean)
	assert.Equal(t, 4, c2.ForeignThreads, "loop, bash, busybox-init, agent; not sshd")
	assert.Equal(t, map[string]int{ForeignOwnAffinity: 1, ForeignCgroup: 1, ForeignRootCgroup: 1, ForeignNoCpuset: 1}, c2.ForeignKinds)
	why := map[string]Thread{}
	for _, th := range c2.Threads {
		why[th.Comm] = th
	}
	assert.Equal(t, ForeignOwnAffinity, why["loop"].Kind)
	assert.Equal(t, "its own affinity (2, narrower than its cgroup's CPUs 0-7) includes CPU 2", why["loop"].Reason)
	assert.Equal(t, ForeignCgroup, why["bash"].Kind)
	assert.Equal(t, "its cgroup /user.slice/session-1.scope allows CPU 2 (CPUs 0-7): not confined", why["bash"].Reason)
	assert.Equal(t, ForeignRootCgroup, why["busybox-init"].Kind)
	assert.Equal(t, "it runs in the root cgroup, whose CPUs (0-7) cannot be narrowed", why["busybox-init"].Reason)
	assert.Equal(t, ForeignNoCpuset, why["agent"].Kind)

	assert.Equal(t, 2, c2.PerCPUKernelThreads, "ksoftirqd/2 and migration/2")
	kernel := map[string]string{}
	for _, th := range c2.KernelThreads {
		kernel[th.Comm] = th.Kind
	}
	assert.Equal(t, map[string]string{"kblockd": KernelNotConfined, "kworker/u16:1-events_unbound": KernelManaged, "rcu_preempt": KernelUnbound}, kernel)

	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "\n    1 ownAffinity: their own affinity includes it (pinned to kept CPUs, or set since housekeeping's last pass); e.g. 401/401 loop (2)\n")
	assert.Contains(t, text.String(), "  unbound kernel threads: 3\n")
	assert.Contains(t, text.String(), "\n    1 kernelManaged: the kernel manages their affinity (PF_NO_SETAFFINITY; workqueue workers follow the workqueue mask); e.g. 90/90 kworker/u16:1-events_unbound (0-7)\n")
}

// TestForeignReasonsV1: on cgroup v1, where housekeeping confines host
// processes by affinity, a thread allowed every CPU of the host (the
// online ones, not isolated) was not narrowed
// (noCpuset), one with an affinity of its own says so (ownAffinity), and
// one whose narrowing the kernel refused says why (refused).
func TestForeignReasonsV1(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	host := all.Difference(cpuset.New(5)) // the machine's CPU 5 is isolated
	v1 := "4:cpuset:/system.slice\n1:name=systemd:/system.slice/x.service"
	m.spec.Processes = append(m.spec.Processes,
		procfixture.Process{PID: 500, Comm: "confined", AllowedCPUs: cpuset.New(0, 1), Cgroup: v1},
		procfixture.Process{PID: 501, Comm: "everywhere", AllowedCPUs: host, Cgroup: v1},
		procfixture.Process{PID: 502, Comm: "pinned", AllowedCPUs: cpuset.New(2, 3), Cgroup: v1},
		procfixture.Process{PID: 503, Comm: "refused", AllowedCPUs: all, Cgroup: v1},
	)
	procfixture.Write(t, m.proc, m.spec)
	require.NoError(t, os.MkdirAll(filepath.Join(m.sys, "sys/devices/system/cpu"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(m.sys, "sys/devices/system/cpu/online"), []byte("0-7\n"), 0o644))
	opt := m.options(m.fire(t, nil))
	opt.Refused["/affinity/503/42"] = "write /affinity/503/42: invalid argument"
	rep, err := Gather(holdings[:1], opt)
	require.NoError(t, err)
	why := map[string]Thread{}
	for _, th := range rep.CPUs[0].Threads {
		why[th.Comm] = th
	}
	assert.NotContains(t, why, "confined")
	assert.Equal(t, ForeignNoCpuset, why["everywhere"].Kind)
	assert.Equal(t, ForeignOwnAffinity, why["pinned"].Kind)
	assert.Contains(t, why["pinned"].Reason, "its own affinity (2-3, not every CPU of the host, 0-4,6-7) includes CPU 2")
	assert.Equal(t, ForeignRefused, why["refused"].Kind)
	assert.Equal(t, "the kernel refused to narrow its affinity: write /affinity/503/42: invalid argument", why["refused"].Reason)
}

// TestForeignReasonsIsolcpus (issue 42, item 2): a host process in a
// cgroup v2 slice whose cpuset is every CPU runs on a held isolcpus= CPU
// (its affinity reset by the cgroup's cpuset change): the audit names
// that cause, in the text and in --json, not a mere cgroup not confined.
func TestForeignReasonsIsolcpus(t *testing.T) {
	host := all.Difference(cpuset.New(5)) // PID 1's affinity: not isolated CPU 5
	m := newMachine(t, host)
	m.spec.Processes = append(m.spec.Processes,
		procfixture.Process{PID: 500, Comm: "stress-ng", AllowedCPUs: all, Cgroup: "0::/system.slice/load.service"},
		procfixture.Process{PID: 501, Comm: "init-child", AllowedCPUs: all, Cgroup: "0::/"},
	)
	procfixture.Write(t, m.proc, m.spec)
	m.cgroupCPUs(t, "/system.slice/load.service", all)

	rep, err := Gather([]Holding{{CPUs: cpuset.New(5), Owner: "telco/dpdk/fwd", Pool: "exclusive"}}, m.options(m.fire(t, nil)))
	require.NoError(t, err)
	c5 := rep.CPUs[0]
	require.True(t, c5.DomainIsolated)
	assert.Equal(t, map[string]int{ForeignIsolcpusReset: 1, ForeignRootCgroup: 1}, c5.ForeignKinds, "the root cgroup's CPUs are no cpuset change's")
	var th Thread
	for _, x := range c5.Threads {
		if x.Comm == "stress-ng" {
			th = x
		}
	}
	assert.Equal(t, ForeignIsolcpusReset, th.Kind)
	assert.Contains(t, th.Reason, "CPU 5 is an isolcpus= CPU, which PID 1's affinity leaves out, but its cgroup /system.slice/load.service allows it (CPUs 0-7)")
	assert.Contains(t, th.Reason, "resets the affinity of the cgroup's tasks")
	assert.Contains(t, th.Reason, "keepHostOffIsolcpus")
	assert.Contains(t, c5.Problems, "2 threads of other processes may run on it; 1 of them although it is an isolcpus= CPU: a cgroup v2 cpuset change reset their affinity to every CPU, and nothing balances a task off an isolated CPU (keepHostOffIsolcpus keeps them off)")

	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "\n    1 isolcpusAffinityReset: on an isolcpus= CPU because their cgroup's cpuset")
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"kind":"isolcpusAffinityReset"`)
	assert.Contains(t, string(js), `"isolcpusAffinityReset":1`)
}
