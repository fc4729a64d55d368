package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
	"github.com/cpupool/nri-cpupool/state"
)

const auditFwd = "8d1f5e0c9a7b6d4e3f2a1b0c9d8e7f6a"

// auditNode writes a state file (an exclusive container on CPUs 4-5, CPU 6
// held for a stopped one, a shared container) and a /proc where the host's
// processes may run on hostCPUs.
func auditNode(t *testing.T, hostCPUs cpuset.CPUSet) (stateFile, proc string) {
	t.Helper()
	dir := t.TempDir()
	st := state.NewState()
	require.NoError(t, json.Unmarshal([]byte(`{
  "containers": {
    "`+auditFwd+`": {"podUID": "uid-1", "podNamespace": "telco", "podName": "dpdk", "container": "fwd", "pool": "exclusive", "milliCPU": 2000, "cpus": "4-5", "mems": "0"},
    "1a2b3c": {"podUID": "uid-2", "podNamespace": "default", "podName": "web", "container": "app", "pool": "shared", "milliCPU": 500, "cpus": "2-3", "mems": "0"}
  },
  "held": {"uid-1/old": {"containerID": "0123", "podUID": "uid-1", "podNamespace": "telco", "podName": "dpdk", "container": "old", "pool": "exclusive", "milliCPU": 1000, "cpus": "6", "mems": "0"}}
}`), st))
	stateFile = filepath.Join(dir, "state.json")
	store := state.NewFileStore(stateFile)
	require.NoError(t, store.Save(st))
	store.Close()
	all := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	proc = procfixture.Write(t, filepath.Join(dir, "proc"), procfixture.Spec{CPUs: all,
		IRQs: []procfixture.IRQ{{N: 24, Affinity: cpuset.New(0, 1), Node: 0, Description: "PCI-MSI 1-edge eth0", Counts: map[int]uint64{0: 10}}},
		Processes: []procfixture.Process{
			{PID: 1, Comm: "systemd", AllowedCPUs: hostCPUs, Cgroup: "0::/init.scope"},
			// The host's PID namespace (housekeeping.SeesHostThreads).
			{PID: 2, Comm: "kthreadd", Kernel: true, AllowedCPUs: hostCPUs, Cgroup: "0::/"},
			{PID: 300, Comm: "dpdk-fwd", AllowedCPUs: cpuset.New(4, 5), Cgroup: "0::/kubepods/poduid-1/" + auditFwd},
		}})
	return stateFile, proc
}

// TestAuditExitCode: 0 when every held exclusive CPU is clean, 3 when one
// is not (host threads may run on it), with the text saying why; --json
// carries the same.
func TestAuditExitCode(t *testing.T) {
	sys := t.TempDir()
	stateFile, proc := auditNode(t, cpuset.New(0, 1))
	code, out, errOut := run(t, "audit", "--state-file", stateFile, "--proc-root", proc, "--sysfs-root", sys, "--cgroup-root", sys, "--sample", "1ms")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "CPU 4  telco/dpdk/fwd (exclusive)  clean\n")
	assert.Contains(t, out, "CPU 6  telco/dpdk/old (stopped, held) (exclusive)  clean\n")
	assert.NotContains(t, out, "CPU 2", "shared CPUs are not audited")
	assert.Contains(t, out, "every held exclusive CPU is clean")

	stateFile, proc = auditNode(t, cpuset.New(0, 1, 2, 3, 4, 5, 6, 7))
	code, out, _ = run(t, "audit", "--state-file", stateFile, "--proc-root", proc, "--sysfs-root", sys, "--cgroup-root", sys, "--sample", "1ms")
	assert.Equal(t, auditNotClean, code)
	assert.Contains(t, out, "CPU 5  telco/dpdk/fwd (exclusive)  NOT CLEAN\n  - 1 thread of other processes may run on it (it is neither domain-isolated nor in an isolated partition)\n")
	assert.Contains(t, out, "  threads of other processes: 1\n    1 noCpuset: no cpuset confines them and their affinity is not narrowed (housekeeping off for this pool, or its first pass has not run); e.g. 1/1 systemd (0-7)\n")
	assert.Contains(t, out, "each thread and its own reason: nri-cpupool audit --json\n")

	code, out, _ = run(t, "audit", "--state-file", stateFile, "--proc-root", proc, "--sysfs-root", sys, "--sample", "1ms", "--json")
	assert.Equal(t, auditNotClean, code)
	var rep struct {
		Clean bool `json:"clean"`
		CPUs  []struct {
			CPU            int    `json:"cpu"`
			Owner          string `json:"owner"`
			ForeignThreads int    `json:"foreignThreads"`
		} `json:"cpus"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.False(t, rep.Clean)
	require.Len(t, rep.CPUs, 3)
	assert.Equal(t, 1, rep.CPUs[0].ForeignThreads)
}

// TestAuditWithoutTheHostsProcesses: a proc root where PID 2 is not
// kthreadd (a pod without hostPID, as the shipped DaemonSet and chart run)
// shows none of the host's threads, so audit cannot say a CPU is clean: it
// says unknown, why and what to do, and exits 1, not 0 (review 58, item 2).
func TestAuditWithoutTheHostsProcesses(t *testing.T) {
	sys := t.TempDir()
	stateFile, proc := auditNode(t, cpuset.New(0, 1))
	require.NoError(t, os.RemoveAll(filepath.Join(proc, "2")))
	code, out, errOut := run(t, "audit", "--state-file", stateFile, "--proc-root", proc, "--sysfs-root", sys, "--cgroup-root", sys, "--sample", "1ms")
	assert.Equal(t, 1, code, "not clean (0), and nothing found (3)")
	assert.Contains(t, out, "CPU 4  telco/dpdk/fwd (exclusive)  unknown\n")
	assert.Contains(t, out, "note: "+proc+" does not show the host's processes (its PID 2 is not kthreadd")
	assert.NotContains(t, out, "is clean")
	assert.Equal(t, "nri-cpupool audit: the verdict on 3 held CPUs (4-6) is unknown: "+proc+" does not show the host's processes (see the note)\n", errOut)

	code, out, _ = run(t, "audit", "--state-file", stateFile, "--proc-root", proc, "--sysfs-root", sys, "--sample", "1ms", "--json")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, `"seesHostThreads": false`)
	assert.Contains(t, out, `"unknown": true`)
}

// TestAuditErrors: a missing state file and a /proc without interrupts
// are errors (exit 1) that say what to fix.
func TestAuditErrors(t *testing.T) {
	code, _, errOut := run(t, "audit", "--state-file", filepath.Join(t.TempDir(), "none.json"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is the plugin running with this --state-file?")

	stateFile, _ := auditNode(t, cpuset.New(0))

	empty := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(empty, "irq"), 0o755))
	code, _, errOut = run(t, "audit", "--state-file", stateFile, "--proc-root", empty, "--sample", "1ms")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "reading interrupts")
}

// TestAuditHeldCPUNotOnlineIsNotClean: the held CPUs 4-6 are neither
// online nor present any more (a VM's CPUs hot-removed, a node that lost
// CPUs): the container does not run on them. audit took "offline" as
// present minus online, so it called them clean and exited 0; a held CPU that is not online is not clean, present or not.
func TestAuditHeldCPUNotOnlineIsNotClean(t *testing.T) {
	sys := t.TempDir()
	cpuDir := filepath.Join(sys, "sys/devices/system/cpu")
	require.NoError(t, os.MkdirAll(cpuDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "online"), []byte("0-3\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "present"), []byte("0-3\n"), 0o644))
	stateFile, proc := auditNode(t, cpuset.New(0, 1))
	code, out, errOut := run(t, "audit", "--state-file", stateFile, "--proc-root", proc, "--sysfs-root", sys, "--cgroup-root", sys, "--sample", "1ms")
	assert.Equal(t, 3, code, "held CPUs 4-6 are not online: not clean\n%s%s", out, errOut)
	assert.NotContains(t, out, "CPU 4  telco/dpdk/fwd (exclusive)  clean\n")
	assert.Contains(t, out, "not present")
}
