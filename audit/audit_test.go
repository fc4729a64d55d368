package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

const fwdID = "4f1c2a9b8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b"

var all = cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)

// machine is an 8-CPU node: a DPDK container holds CPUs 2-3, CPU 5 is held
// for a stopped container.
type machine struct {
	proc, sys, cgroup string
	spec              procfixture.Spec
}

func newMachine(t *testing.T, hostAllowed cpuset.CPUSet) *machine {
	t.Helper()
	dir := t.TempDir()
	m := &machine{proc: filepath.Join(dir, "proc"), sys: filepath.Join(dir, "sysroot"), cgroup: filepath.Join(dir, "cgroup")}
	m.spec = procfixture.Spec{
		CPUs: all,
		IRQs: []procfixture.IRQ{
			{N: 25, Affinity: cpuset.New(0, 1, 4, 5, 6, 7), Node: 0, Description: "PCI-MSI 49153-edge virtio0-input.0", Counts: map[int]uint64{0: 1000, 2: 7}},
			{N: 28, Affinity: cpuset.New(2, 3), Node: 0, Description: "PCI-MSI 524288-edge nvme0q2", Counts: map[int]uint64{3: 50}},
		},
		Arch: []procfixture.IRQ{{Name: "LOC", Description: "Local timer interrupts", Counts: map[int]uint64{0: 100, 2: 100, 3: 100, 5: 100}}},
		Processes: []procfixture.Process{
			{PID: 1, Comm: "systemd", AllowedCPUs: hostAllowed, Cgroup: "0::/init.scope"},
			{PID: 2, Comm: "kthreadd", Kernel: true, AllowedCPUs: hostAllowed, Cgroup: "0::/"},
			// A workqueue rescuer: a real kernel leaves it allowed everywhere.
			{PID: 85, Comm: "kblockd", Kernel: true, AllowedCPUs: all, Cgroup: "0::/"},
			{PID: 22, Comm: "ksoftirqd/2", Kernel: true, AllowedCPUs: cpuset.New(2), Cgroup: "0::/"},
			{PID: 23, Comm: "ksoftirqd/3", Kernel: true, AllowedCPUs: cpuset.New(3), Cgroup: "0::/"},
			{PID: 100, Comm: "dpdk-fwd", Cgroup: "0::/kubepods/pod-telco/" + fwdID, Threads: []procfixture.Thread{
				{TID: 100, Comm: "dpdk-fwd", AllowedCPUs: cpuset.New(2, 3)},
				{TID: 101, Comm: "lcore-worker-3", AllowedCPUs: cpuset.New(3)},
			}},
			{PID: 200, Comm: "nginx", AllowedCPUs: cpuset.New(0, 1), Cgroup: "0::/kubepods/pod-web/c2"},
		},
	}
	procfixture.Write(t, m.proc, m.spec)
	cpuDir := filepath.Join(m.sys, "sys/devices/system/cpu")
	for rel, content := range map[string]string{
		"isolated": "5", "nohz_full": "5",
		"cpu2/power/pm_qos_resume_latency_us": "0",
		"cpu2/cpuidle/state0/name":            "POLL", "cpu2/cpuidle/state0/disable": "0",
		"cpu2/cpuidle/state1/name": "C1", "cpu2/cpuidle/state1/disable": "1",
		"cpu2/cpuidle/state10/name": "C10", "cpu2/cpuidle/state10/disable": "0",
		"cpu2/cpufreq/scaling_governor": "performance", "cpu2/cpufreq/scaling_min_freq": "800000",
		"cpu2/cpufreq/scaling_max_freq": "3500000", "cpu2/cpufreq/scaling_cur_freq": "3499000",
	} {
		p := filepath.Join(cpuDir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content+"\n"), 0o644))
	}
	require.NoError(t, os.MkdirAll(m.cgroup, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(m.cgroup, "cpuset.cpus.isolated"), []byte("3,5\n"), 0o644))
	m.cgroupCPUs(t, "/", all)
	m.cgroupCPUs(t, "/init.scope", all)
	return m
}

// cgroupCPUs gives a cgroup v2 path its effective CPUs.
func (m *machine) cgroupCPUs(t *testing.T, path string, cpus cpuset.CPUSet) {
	t.Helper()
	dir := filepath.Join(m.cgroup, path)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cpuset.cpus.effective"), []byte(cpus.String()+"\n"), 0o644))
}

// fire adds interrupts during the sample: what the kernel counts between
// the two readings.
func (m *machine) fire(t *testing.T, add map[string]map[int]uint64) func(time.Duration) {
	return func(time.Duration) {
		irqs := append(append([]procfixture.IRQ{}, m.spec.IRQs...), m.spec.Arch...)
		for i := range irqs {
			id := irqs[i].Name
			if id == "" {
				id = strconv.Itoa(irqs[i].N)
			}
			counts := map[int]uint64{}
			for c, n := range irqs[i].Counts {
				counts[c] = n
			}
			for c, n := range add[id] {
				counts[c] += n
			}
			irqs[i].Counts = counts
		}
		require.NoError(t, os.WriteFile(filepath.Join(m.proc, "interrupts"), []byte(procfixture.Interrupts(all, irqs)), 0o644))
	}
}

var holdings = []Holding{
	{CPUs: cpuset.New(2, 3), Owner: "telco/dpdk/fwd", Pool: "exclusive", ContainerID: fwdID, PowerClass: "low-latency"},
	{CPUs: cpuset.New(5), Owner: "telco/dpdk/init", Pool: "exclusive-non-isolcpus"},
}

func (m *machine) options(wait func(time.Duration)) Options {
	return Options{ProcRoot: m.proc, SysfsRoot: m.sys, CgroupRoot: m.cgroup, Sample: time.Second, Wait: wait,
		Refused: map[string]string{filepath.Join(m.proc, "irq/28/smp_affinity_list"): "input/output error (a kernel-managed IRQ)"}}
}

// TestNotClean: a device IRQ fired on CPU 2 (movable) and a managed one on
// CPU 3 (not movable); host threads may run on CPUs 2 and 3, which
// neither isolcpus nor a partition covers for CPU 2. The owner's threads
// and the per-CPU kernel threads are not held against them.
func TestNotClean(t *testing.T) {
	m := newMachine(t, all)
	rep, err := Gather(holdings, m.options(m.fire(t, map[string]map[int]uint64{"25": {0: 10, 2: 3}, "28": {3: 40}, "LOC": {2: 250, 3: 250}})))
	require.NoError(t, err)
	assert.False(t, rep.Clean)
	require.Len(t, rep.CPUs, 3)
	c2, c3, c5 := rep.CPUs[0], rep.CPUs[1], rep.CPUs[2]

	assert.Equal(t, 2, c2.CPU)
	assert.Equal(t, "telco/dpdk/fwd", c2.Owner)
	assert.False(t, c2.Clean)
	require.Len(t, c2.IRQs, 2)
	assert.Equal(t, IRQ{ID: "25", Description: "PCI-MSI 49153-edge virtio0-input.0", Count: 3, Device: true, Movable: true, Affinity: "0-1,4-7"}, c2.IRQs[0])
	assert.Equal(t, IRQ{ID: "LOC", Description: "Local timer interrupts", Count: 250, Reason: "a per-CPU interrupt of the kernel"}, c2.IRQs[1])
	assert.Equal(t, 1, c2.ForeignThreads, "systemd; not the owner's threads, not kthreadd")
	assert.Equal(t, []Thread{{PID: 1, TID: 1, Comm: "systemd", Allowed: "0-7", Kind: ForeignCgroup, Reason: "its cgroup /init.scope allows CPU 2 (CPUs 0-7): not confined"}}, c2.Threads)
	assert.Equal(t, 1, c2.PerCPUKernelThreads)
	assert.Equal(t, 2, c2.UnboundKernelThreads, "kthreadd and kblockd: reported, not judged")
	assert.Equal(t, []string{"device IRQs fired on it: 25 (3)", "1 thread of other processes may run on it (it is neither domain-isolated nor in an isolated partition)"}, c2.Problems)
	assert.Equal(t, Power{Class: "low-latency", ResumeLatencyUS: "0", IdleStates: []IdleState{{"POLL", false}, {"C1", true}, {"C10", false}},
		Governor: "performance", MinKHz: "800000", MaxKHz: "3500000", CurKHz: "3499000"}, c2.Power)
	require.NotNil(t, c2.IsolatedPartition)
	assert.False(t, *c2.IsolatedPartition)

	assert.Equal(t, []string{"device IRQs fired on it: 28 (40); not movable: 28", "1 thread of other processes may run on it"}, c3.Problems)
	assert.False(t, c3.IRQs[0].Movable)
	assert.Contains(t, c3.IRQs[0].Reason, "kernel-managed")
	assert.True(t, *c3.IsolatedPartition)

	assert.True(t, c5.DomainIsolated)
	assert.True(t, c5.NohzFull)
	assert.Empty(t, c5.ContainerID)
	assert.Equal(t, Power{}, c5.Power, "no files, no settings")

	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "CPU 2  telco/dpdk/fwd (exclusive)  NOT CLEAN\n  - device IRQs fired on it: 25 (3)\n")
	assert.Contains(t, text.String(), "28 ×40 [PCI-MSI 524288-edge nvme0q2, not movable: input/output error (a kernel-managed IRQ)]")
	assert.Contains(t, text.String(), "idle states POLL C1 (disabled) C10")
	assert.Contains(t, text.String(), "some held exclusive CPUs are not clean\n")
	data, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"cpu":2,"owner":"telco/dpdk/fwd","pool":"exclusive","containerID":"`+fwdID+`","clean":false`)
}

// TestClean: the host's threads are kept off the held CPUs and no device
// IRQ fires there (the timer does, and a workqueue rescuer may run there):
// clean.
func TestClean(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	opt := m.options(m.fire(t, map[string]map[int]uint64{"25": {0: 10}, "LOC": {2: 250}}))
	opt.Refused = nil // no host file refused either: all is well (TestAuditListsRefusedAndUntrustedHostFiles)
	rep, err := Gather(holdings, opt)
	require.NoError(t, err)
	assert.True(t, rep.Clean, "%+v", rep)
	for _, c := range rep.CPUs {
		assert.True(t, c.Clean, "CPU %d: %v", c.CPU, c.Problems)
		assert.Equal(t, 1, c.UnboundKernelThreads)
	}
	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "every held exclusive CPU is clean\n")
}

// TestBlindProcRootIsUnknown: a proc root that does not show the host's
// processes (its PID 2 is not kthreadd: a pod without hostPID, as the
// shipped DaemonSet runs) hides the host's threads. TestClean's node is
// then not clean but unknown, with a note saying why and what to do; a CPU
// with a finding of its own (a device IRQ fired) is still not clean
// (review 58, item 2).
func TestBlindProcRootIsUnknown(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	require.NoError(t, os.RemoveAll(filepath.Join(m.proc, "2"))) // the pod's PID 2 would be one of its own processes
	rep, err := Gather(holdings, m.options(m.fire(t, map[string]map[int]uint64{"25": {0: 10}, "28": {3: 40}, "LOC": {2: 250}})))
	require.NoError(t, err)
	assert.False(t, rep.Clean)
	assert.False(t, rep.SeesHostThreads)
	require.Len(t, rep.CPUs, 3)
	c2, c3, c5 := rep.CPUs[0], rep.CPUs[1], rep.CPUs[2]
	for _, c := range []CPU{c2, c5} {
		assert.False(t, c.Clean, "CPU %d", c.CPU)
		assert.True(t, c.Unknown, "CPU %d", c.CPU)
		assert.Empty(t, c.Problems, "CPU %d", c.CPU)
	}
	assert.False(t, c3.Clean)
	assert.False(t, c3.Unknown, "a device IRQ fired on it: not clean, whatever the threads")
	require.Len(t, rep.Notes, 1)
	assert.Contains(t, rep.Notes[0], m.proc+" does not show the host's processes (its PID 2 is not kthreadd")
	assert.Contains(t, rep.Notes[0], "run audit on the host, or in a pod with hostPID: true, or point --proc-root (procRoot) at the host's /proc")

	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "CPU 2  telco/dpdk/fwd (exclusive)  unknown\n  - nothing found, but the host's threads that may run on it cannot be seen here (see the note)\n")
	assert.Contains(t, text.String(), "CPU 3  telco/dpdk/fwd (exclusive)  NOT CLEAN\n")
	assert.Contains(t, text.String(), "kernel threads not visible here\n")
	assert.Contains(t, text.String(), "some held exclusive CPUs are not clean\n")

	rep, err = Gather(holdings[1:], m.options(m.fire(t, nil)))
	require.NoError(t, err)
	text.Reset()
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "CPU 5  telco/dpdk/init (exclusive-non-isolcpus)  unknown\n")
	assert.True(t, strings.HasSuffix(text.String(), "whether the held exclusive CPUs are clean is unknown: the host's threads cannot be seen here (see the note)\n"), text.String())
	data, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"clean":false,"seesHostThreads":false`)
	assert.Contains(t, string(data), `"clean":false,"unknown":true`)
}

// TestNothingHeld: nothing to audit is clean.
func TestNothingHeld(t *testing.T) {
	m := newMachine(t, all)
	opt := m.options(func(time.Duration) {})
	opt.Refused = nil
	rep, err := Gather(nil, opt)
	require.NoError(t, err)
	assert.True(t, rep.Clean)
	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	assert.Equal(t, "no exclusive CPU is held\n", text.String())

	// A refused host file is listed even so.
	rep, err = Gather(nil, m.options(func(time.Duration) {}))
	require.NoError(t, err)
	text.Reset()
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "no exclusive CPU is held\nhost files the plugin could not leave as it wants")
}

// TestNoInterrupts: a /proc without interrupts is an error naming it.
func TestNoInterrupts(t *testing.T) {
	_, err := Gather(holdings, Options{ProcRoot: t.TempDir(), Wait: func(time.Duration) {}})
	assert.ErrorContains(t, err, "interrupts")
}

// TestConmonIsForeign: CRI-O's conmon runs in crio-conmon-<id>.scope, a
// cgroup whose name contains the container's id but is not the
// container's. Allowed on every CPU, it may run on the held ones: a
// foreign thread (issue 30 defect 8). The container's own threads, in
// the cgroups each runtime and driver gives them, are not.
func TestConmonIsForeign(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	m.spec.Processes = append(m.spec.Processes,
		procfixture.Process{PID: 300, Comm: "conmon", AllowedCPUs: all,
			Cgroup: "0::/system.slice/crio-conmon-" + fwdID + ".scope"},
		// The container's own, with CRI-O's systemd driver (in a child).
		procfixture.Process{PID: 301, Comm: "dpdk-helper", AllowedCPUs: cpuset.New(2, 3),
			Cgroup: "0::/kubepods.slice/kubepods-pod1.slice/crio-" + fwdID + ".scope/container"})
	procfixture.Write(t, m.proc, m.spec)
	m.cgroupCPUs(t, "/system.slice/crio-conmon-"+fwdID+".scope", all)
	rep, err := Gather(holdings, m.options(m.fire(t, nil)))
	require.NoError(t, err)
	c2, c3 := rep.CPUs[0], rep.CPUs[1]
	for _, c := range []CPU{c2, c3} {
		assert.False(t, c.Clean, "CPU %d: conmon may run on it", c.CPU)
		assert.Equal(t, 1, c.ForeignThreads, "CPU %d: conmon, not dpdk-helper", c.CPU)
		require.Len(t, c.Threads, 1)
		assert.Equal(t, Thread{PID: 300, TID: 300, Comm: "conmon", Allowed: "0-7", Kind: ForeignCgroup}, Thread{PID: c.Threads[0].PID, TID: c.Threads[0].TID, Comm: c.Threads[0].Comm, Allowed: c.Threads[0].Allowed, Kind: c.Threads[0].Kind})
	}
}

// TestContainerInCgroup: only a whole component of a cgroup path, in the
// forms the runtimes and cgroup drivers use, names the container.
func TestContainerInCgroup(t *testing.T) {
	const id = fwdID
	for path, want := range map[string]bool{
		"/kubepods/burstable/pod1/" + id:                                                     true, // containerd, cgroupfs
		"/kubepods/burstable/pod1/crio-" + id:                                                true, // CRI-O, cgroupfs
		"/kubepods.slice/kubepods-burstable.slice/kubepods-pod1.slice/crio-" + id + ".scope": true,
		"/kubepods.slice/kubepods-pod1.slice/crio-" + id + ".scope/container":                true,
		"/kubepods.slice/kubepods-pod1.slice/cri-containerd-" + id + ".scope":                true,
		"/system.slice/crio-conmon-" + id + ".scope":                                         false,
		"/kubepods/burstable/pod1/crio-conmon-" + id:                                         false,
		"/kubepods/burstable/pod1/" + id + "-sidecar":                                        false,
		"/kubepods/burstable/pod1/" + id[:20]:                                                false,
		"/docker/x" + id:                                                                     false,
		"/":                                                                                  false,
	} {
		assert.Equal(t, want, containerInCgroup(path, id), path)
	}
	// cgroup v1: one line per hierarchy; the container's in any of them.
	v1 := "12:cpuset:/kubepods/burstable/pod1/" + id + "\n11:memory:/kubepods/burstable/pod1/" + id + "\n1:name=systemd:/kubepods/burstable/pod1/" + id + "\n"
	assert.True(t, task{cgroup: v1}.owner(id))
	assert.False(t, task{cgroup: "12:cpuset:/system.slice/crio-conmon-" + id + ".scope\n"}.owner(id))
	assert.False(t, task{cgroup: v1}.owner(""), "a stopped container owns no thread")
}

// TestOfflineHeldCPU: a held CPU the kernel took offline (CPU hotplug) is
// reported, and not clean: its container runs on one CPU fewer than it
// was given until the CPU is back.
func TestOfflineHeldCPU(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	cpuDir := filepath.Join(m.sys, "sys/devices/system/cpu")
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "present"), []byte("0-7\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "online"), []byte("0-2,4-7\n"), 0o644))
	rep, err := Gather(holdings, m.options(m.fire(t, map[string]map[int]uint64{"25": {0: 10}})))
	require.NoError(t, err)
	assert.False(t, rep.Clean)
	require.Len(t, rep.CPUs, 3)
	assert.False(t, rep.CPUs[0].Offline)
	assert.True(t, rep.CPUs[0].Clean)
	c3 := rep.CPUs[1]
	assert.True(t, c3.Offline)
	assert.False(t, c3.Clean)
	require.Len(t, c3.Problems, 1)
	assert.Contains(t, c3.Problems[0], "offline")

	// Back online: clean again.
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "online"), []byte("0-7\n"), 0o644))
	rep, err = Gather(holdings, m.options(m.fire(t, map[string]map[int]uint64{"25": {0: 10}})))
	require.NoError(t, err)
	assert.True(t, rep.Clean, "%+v", rep)
}

// TestHeldCPUNotPresentIsNotClean: a held CPU that is neither online nor
// present (hot-removed) is offline for its owner, and not clean: audit
// took offline as present minus online and called it clean, and
// so did the daemon's cpupool_exclusive_cpu_clean, which is this
// verdict.
func TestHeldCPUNotPresentIsNotClean(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	cpuDir := filepath.Join(m.sys, "sys/devices/system/cpu")
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "present"), []byte("0-2,4-7\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cpuDir, "online"), []byte("0-2,4-7\n"), 0o644))
	rep, err := Gather(holdings, m.options(m.fire(t, map[string]map[int]uint64{"25": {0: 10}})))
	require.NoError(t, err)
	assert.False(t, rep.Clean)
	require.Len(t, rep.CPUs, 3)
	assert.True(t, rep.CPUs[0].Clean, "CPU 2 is online")
	c3 := rep.CPUs[1]
	assert.True(t, c3.Offline)
	assert.False(t, c3.Clean)
	require.Len(t, c3.Problems, 1)
	assert.Contains(t, c3.Problems[0], "not present")
}
