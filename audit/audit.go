// Package audit tells an operator, per exclusive CPU that a container
// holds, what may still disturb it: the device interrupts that fired on it
// during a short sample (/proc/interrupts deltas) and whether they can be
// moved, the threads of other processes allowed to run on it
// (/proc/*/task/*/status Cpus_allowed_list), and what the kernel does for
// it: domain isolation (isolcpus), an isolated cgroup v2 partition,
// nohz_full, and its idle-state and frequency settings where they exist.
//
// A held CPU is clean when, during the sample, no device IRQ fired on it
// and no thread of another process (user space) may run on it. A device
// IRQ the kernel still routes to it while its move waits for its next
// interrupt (pending.go) is reported, not judged (see judge). What the kernel keeps for itself is reported, not judged: the
// architecture's per-CPU interrupts (LOC, RES, CAL, TLB, ...; nohz_full
// reduces the timer's), the per-CPU kernel threads bound to it alone
// (ksoftirqd/N, migration/N, kworker/N:*, which every CPU has), and the
// unbound kernel threads allowed on it (workqueue rescuers such as kblockd
// or rcu_gp, which a real kernel leaves allowed on every CPU, even isolcpus
// ones, and which run only under memory pressure or for queued work).
//
// Each foreign thread, and each unbound kernel thread listed, says why it
// may still run there (reasons.go): its own affinity, a cgroup not
// confined, an isolcpus= CPU that a cgroup v2 cpuset change put back in
// its affinity, the root cgroup, the kernel keeping its affinity or refusing
// to narrow it (the journal's refusals), or housekeeping not narrowing it.
//
// A device IRQ is movable unless the plugin's journal lists its affinity
// file as refused by the kernel (a kernel-managed IRQ).
//
// Threads are read below the proc root. One that does not show the host's
// PID namespace (housekeeping.SeesHostThreads: a pod without hostPID)
// shows only its own processes: a held CPU on which nothing else is found
// is then unknown, never clean, and the report's notes say why and what
// to do.
package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/housekeeping"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/internal/procfs"
	"github.com/cpupool/nri-cpupool/irq"
)

// Holding is exclusive CPUs one container holds (or holds for its pod
// while it is stopped).
type Holding struct {
	CPUs cpuset.CPUSet
	// Owner is "namespace/pod/container".
	Owner string
	Pool  string
	// ContainerID is the running container's id; empty for CPUs held for
	// a stopped container. The owner's threads are found by it in
	// /proc/<pid>/cgroup.
	ContainerID string
	// PowerClass is the owner's power class, "" for none.
	PowerClass string
}

// Options say where to look and how long to sample.
type Options struct {
	ProcRoot   string // "/proc"
	SysfsRoot  string // "/": sys/devices/system/cpu below it
	CgroupRoot string // "/sys/fs/cgroup": cpuset.cpus.isolated on cgroup v2
	// Sample is the time between the two readings of /proc/interrupts.
	Sample time.Duration
	// Wait waits out the sample (time.Sleep when nil).
	Wait func(time.Duration)
	// Refused are the host files the kernel refused for good, with why
	// (hostfiles.ReadJournal).
	Refused map[string]string
	// MaxThreads bounds the threads listed per CPU (all are counted), and
	// the kernel masks (kernelwork.go).
	MaxThreads int
	// RPSKept and WorkqueuesKept say that the plugin keeps receive packet
	// steering and unbound workqueues off held CPUs (kernelWork.*: held):
	// a mask that names a held CPU is then a problem; else it is listed
	// as information.
	RPSKept, WorkqueuesKept bool
}

// Report is the audit of every held exclusive CPU.
type Report struct {
	// At is when the sample ended.
	At     time.Time `json:"at"`
	Sample string    `json:"sample"`
	// Clean tells whether every held exclusive CPU is clean.
	Clean bool `json:"clean"`
	// SeesHostThreads tells whether the proc root showed the host's
	// processes. When it did not, the threads listed and counted are only
	// those it showed, and a CPU with no finding is Unknown.
	SeesHostThreads bool  `json:"seesHostThreads"`
	CPUs            []CPU `json:"cpus"`
	// Notes say what audit could not check on this node, once each.
	Notes []string `json:"notes,omitempty"`
	// HostFiles are the host files the plugin could not leave as it
	// wants (hostfiles.go); absent when none. They do not change Clean,
	// which is about the CPUs.
	HostFiles []HostFile `json:"hostFiles,omitempty"`
}

// CPU is the audit of one held exclusive CPU.
type CPU struct {
	CPU         int    `json:"cpu"`
	Owner       string `json:"owner"`
	Pool        string `json:"pool"`
	ContainerID string `json:"containerID,omitempty"`
	Clean       bool   `json:"clean"`
	// Unknown tells that nothing was found on it but the host's threads
	// could not be seen (Report.SeesHostThreads): it is not known to be
	// clean. Clean is then false, and Problems empty.
	Unknown bool `json:"unknown,omitempty"`
	// Problems say why it is not clean, one line each.
	Problems []string `json:"problems,omitempty"`
	// IRQs fired on it during the sample.
	IRQs []IRQ `json:"irqs,omitempty"`
	// PendingIRQMoves are device IRQs whose affinity leaves it out while
	// the kernel still routes them to it (pending.go).
	PendingIRQMoves []PendingMove `json:"pendingIRQMoves,omitempty"`
	// ForeignThreads counts the user-space threads of other processes
	// allowed on it; Threads lists the first of them.
	ForeignThreads int      `json:"foreignThreads"`
	Threads        []Thread `json:"threads,omitempty"`
	// ForeignKinds counts the foreign threads by Thread.Kind.
	ForeignKinds map[string]int `json:"foreignKinds,omitempty"`
	// KernelThreads lists the first unbound kernel threads allowed on it,
	// with why (Thread.Kind); the per-CPU ones are only counted.
	KernelThreads []Thread `json:"kernelThreads,omitempty"`
	// PerCPUKernelThreads counts the kernel threads bound to it alone,
	// UnboundKernelThreads those allowed on it and on other CPUs.
	PerCPUKernelThreads  int  `json:"perCPUKernelThreads"`
	UnboundKernelThreads int  `json:"unboundKernelThreads"`
	DomainIsolated       bool `json:"domainIsolated"`
	NohzFull             bool `json:"nohzFull"`
	// IsolatedPartition is nil where the kernel does not say (cgroup v1,
	// or a kernel without cpuset.cpus.isolated).
	IsolatedPartition *bool `json:"isolatedPartition,omitempty"`
	Power             Power `json:"power"`
	// Offline tells that the CPU went offline under its holder: the
	// kernel took it from the container's cpuset (CPU hotplug). Any held
	// CPU the kernel does not list online is, present or not.
	Offline bool `json:"offline,omitempty"`
	// NotPresent tells that the offline CPU is not even present any more
	// (hot-removed, as from a VM): it comes back only once added again.
	NotPresent bool `json:"notPresent,omitempty"`
	// RPS and Workqueues are the kernel masks that name it: receive
	// packet steering and unbound workqueues (kernelwork.go); nil when
	// none does.
	RPS        *MaskUse `json:"rps,omitempty"`
	Workqueues *MaskUse `json:"workqueues,omitempty"`
}

// IRQ is an interrupt that fired on a CPU during the sample.
type IRQ struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	Count       uint64 `json:"count"`
	// Device is true for a numbered IRQ, false for the architecture's
	// per-CPU interrupts.
	Device  bool `json:"device"`
	Movable bool `json:"movable"`
	// Affinity is a device IRQ's smp_affinity_list.
	Affinity string `json:"affinity,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Thread is a thread of another process allowed to run on a CPU.
type Thread struct {
	PID     int    `json:"pid"`
	TID     int    `json:"tid"`
	Comm    string `json:"comm"`
	Allowed string `json:"allowed"`
	// Kind is why it may run there (the Foreign* and Kernel* values of
	// reasons.go), Reason the same for people.
	Kind   string `json:"kind,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Power is a CPU's idle and frequency settings, empty where the files do
// not exist (a VM without cpuidle or cpufreq).
type Power struct {
	// Class is the power class the plugin gives the CPU (its owner's).
	Class           string      `json:"class,omitempty"`
	ResumeLatencyUS string      `json:"resumeLatencyUS,omitempty"`
	IdleStates      []IdleState `json:"idleStates,omitempty"`
	Governor        string      `json:"governor,omitempty"`
	MinKHz          string      `json:"minKHz,omitempty"`
	MaxKHz          string      `json:"maxKHz,omitempty"`
	CurKHz          string      `json:"curKHz,omitempty"`
}

// IdleState is one cpuidle state.
type IdleState struct {
	Name     string `json:"name"`
	Disabled bool   `json:"disabled"`
}

const defaultMaxThreads = 20

// Gather audits the held CPUs. It reads /proc/interrupts, waits the
// sample, reads it again, then reads the threads and sysfs.
func Gather(holdings []Holding, opt Options) (*Report, error) {
	if opt.Wait == nil {
		opt.Wait = time.Sleep
	}
	if opt.MaxThreads == 0 {
		opt.MaxThreads = defaultMaxThreads
	}
	before, err := readInterrupts(opt.ProcRoot)
	if err != nil {
		return nil, err
	}
	opt.Wait(opt.Sample)
	after, err := readInterrupts(opt.ProcRoot)
	if err != nil {
		return nil, err
	}
	deltas := irq.Deltas(before, after)
	owners := map[int]Holding{}
	held := cpuset.New()
	for _, h := range holdings {
		for _, c := range h.CPUs.List() {
			owners[c] = h
		}
		held = held.Union(h.CPUs)
	}
	threads, err := readThreads(opt.ProcRoot, held)
	if err != nil {
		return nil, err
	}
	sees := housekeeping.SeesHostThreads(opt.ProcRoot)
	k := kernelSets(opt)
	cgroups := newCgroupCPUs(opt.CgroupRoot)
	refused := refusedThreads(opt.Refused)
	rpsMasks, wqMasks := readKernelMasks(opt.SysfsRoot, opt.ProcRoot)
	descriptions := map[string]string{}
	for _, i := range after {
		descriptions[i.ID] = i.Description
	}
	pending, note, err := readPendingMoves(opt.ProcRoot, held, descriptions)
	if err != nil {
		return nil, err
	}
	// What a host process may run on when nothing confines it: on cgroup
	// v1, a narrower affinity is its own.
	host := k.online.Difference(k.isolated)
	rep := &Report{At: time.Now().UTC(), Sample: opt.Sample.String(), Clean: true, SeesHostThreads: sees, HostFiles: hostFiles(opt.Refused, opt.ProcRoot)}
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	if !sees && !held.IsEmpty() {
		rep.Notes = append(rep.Notes, blindNote(opt.ProcRoot))
	}
	for _, c := range held.List() {
		h := owners[c]
		cpu := CPU{CPU: c, Owner: h.Owner, Pool: h.Pool, ContainerID: h.ContainerID,
			DomainIsolated: k.isolated.Contains(c), NohzFull: k.nohzFull.Contains(c), Power: readPower(opt.SysfsRoot, c)}
		cpu.Power.Class = h.PowerClass
		cpu.Offline = k.offline(c)
		cpu.NotPresent = cpu.Offline && k.notPresent(c)
		cpu.RPS = maskUse(rpsMasks, c, opt.RPSKept, opt.MaxThreads)
		cpu.Workqueues = maskUse(wqMasks, c, opt.WorkqueuesKept, opt.MaxThreads)
		if k.partitionKnown {
			in := k.partition.Contains(c)
			cpu.IsolatedPartition = &in
		}
		for _, d := range deltas {
			n := d.Fired[c]
			if n == 0 {
				continue
			}
			cpu.IRQs = append(cpu.IRQs, describeIRQ(opt, d.Interrupt, n))
		}
		cpu.PendingIRQMoves = pending[c]
		for _, t := range threads {
			if !t.allowed.Contains(c) || t.owner(h.ContainerID) {
				continue
			}
			if t.kernel && t.allowed.Size() == 1 {
				cpu.PerCPUKernelThreads++
				continue
			}
			if t.kernel {
				cpu.UnboundKernelThreads++
				if len(cpu.KernelThreads) < opt.MaxThreads {
					kind, why := kernelReason(t, refused)
					cpu.KernelThreads = append(cpu.KernelThreads, Thread{PID: t.pid, TID: t.tid, Comm: t.comm, Allowed: t.allowed.String(), Kind: kind, Reason: why})
				}
				continue
			}
			cpu.ForeignThreads++
			kind, why := foreignReason(t, c, cpu.DomainIsolated, cgroups, host, refused)
			if cpu.ForeignKinds == nil {
				cpu.ForeignKinds = map[string]int{}
			}
			cpu.ForeignKinds[kind]++
			if len(cpu.Threads) < opt.MaxThreads {
				cpu.Threads = append(cpu.Threads, Thread{PID: t.pid, TID: t.tid, Comm: t.comm, Allowed: t.allowed.String(), Kind: kind, Reason: why})
			}
		}
		judge(&cpu, sees)
		rep.Clean = rep.Clean && cpu.Clean
		rep.CPUs = append(rep.CPUs, cpu)
	}
	return rep, nil
}

// blindNote says why the threads on the held CPUs are unknown, and how to
// let audit see them.
func blindNote(procRoot string) string {
	return fmt.Sprintf("%s does not show the host's processes (its PID 2 is not kthreadd: a PID namespace of its own, such as a pod without hostPID), "+
		"so the threads of other processes that may run on a held CPU cannot be seen: only its own are listed, and a CPU with no other finding is unknown, not clean; "+
		"run audit on the host, or in a pod with hostPID: true, or point --proc-root (procRoot) at the host's /proc", procRoot)
}

// judge sets Clean, Unknown and Problems. seesHost tells whether the
// host's threads could be seen: without them, no problem found is not
// clean but unknown.
func judge(cpu *CPU, seesHost bool) {
	switch {
	case cpu.NotPresent:
		cpu.Problems = append(cpu.Problems, "offline and not present (hot-removed): the kernel took it from the container's cpuset; it stays the container's and comes back to it once added and online")
	case cpu.Offline:
		// Not a disturbance, but the container runs on one CPU fewer than
		// it was given until the CPU is back.
		cpu.Problems = append(cpu.Problems, "offline: the kernel took it from the container's cpuset; it stays the container's and comes back to it when online")
	}
	var device, unmovable []string
	for _, i := range cpu.IRQs {
		if !i.Device {
			continue
		}
		device = append(device, fmt.Sprintf("%s (%d)", i.ID, i.Count))
		if !i.Movable {
			unmovable = append(unmovable, i.ID)
		}
	}
	if len(device) > 0 {
		p := "device IRQs fired on it: " + strings.Join(device, ", ")
		if len(unmovable) > 0 {
			p += "; not movable: " + strings.Join(unmovable, ", ")
		}
		cpu.Problems = append(cpu.Problems, p)
	}
	// A deferred move (PendingIRQMoves) is reported, not judged. Its IRQ
	// takes at most one more interrupt here, its next, which completes the
	// move; one that fires during the sample is judged above, as fired.
	// One that never fires never completes it: an unused queue, or, where
	// the kernel moves an IRQ only from its own interrupt (MSI without
	// interrupt remapping, as in a VM), every quiet IRQ moved at all. As a
	// problem it would keep such a CPU NOT CLEAN, and audit's exit status
	// failing, for an interrupt that may never come.
	if cpu.ForeignThreads > 0 {
		p := plural.Count(cpu.ForeignThreads, "thread") + " of other processes may run on it"
		if !cpu.DomainIsolated && (cpu.IsolatedPartition == nil || !*cpu.IsolatedPartition) {
			p += " (it is neither domain-isolated nor in an isolated partition)"
		}
		if n := cpu.ForeignKinds[ForeignIsolcpusReset]; n > 0 {
			p += fmt.Sprintf("; %d of them although it is an isolcpus= CPU: a cgroup v2 cpuset change reset their affinity to every CPU, and nothing balances a task off an isolated CPU (keepHostOffIsolcpus keeps them off)", n)
		}
		cpu.Problems = append(cpu.Problems, p)
	}
	judgeKernelWork(cpu)
	cpu.Clean = len(cpu.Problems) == 0 && seesHost
	cpu.Unknown = len(cpu.Problems) == 0 && !seesHost
}

func describeIRQ(opt Options, i irq.Interrupt, n uint64) IRQ {
	out := IRQ{ID: i.ID, Description: i.Description, Count: n, Device: i.Numbered()}
	if !out.Device {
		out.Reason = "a per-CPU interrupt of the kernel"
		return out
	}
	file := filepath.Join(opt.ProcRoot, "irq", i.ID, "smp_affinity_list")
	if data, err := os.ReadFile(file); err == nil {
		out.Affinity = strings.TrimSpace(string(data))
	}
	if why, refused := opt.Refused[file]; refused {
		out.Reason = why
		return out
	}
	out.Movable = true
	return out
}

func readInterrupts(procRoot string) ([]irq.Interrupt, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, "interrupts"))
	if err != nil {
		return nil, fmt.Errorf("reading interrupts: %w", err)
	}
	return irq.ParseInterrupts(data)
}

// kernelSet are the node-wide CPU sets the kernel isolates.
type kernelSet struct {
	isolated, nohzFull, partition cpuset.CPUSet
	partitionKnown                bool
	// online are the online CPUs (onlineKnown: the kernel says which);
	// present, the present ones (presentKnown). A held CPU not online is
	// offline whether present or not: taking offline as present minus
	// online called a hot-removed CPU clean.
	online, present           cpuset.CPUSet
	onlineKnown, presentKnown bool
}

// offline tells whether the kernel says c is not online.
func (k kernelSet) offline(c int) bool { return k.onlineKnown && !k.online.Contains(c) }

// notPresent tells whether the kernel says c is not present.
func (k kernelSet) notPresent(c int) bool { return k.presentKnown && !k.present.Contains(c) }

func kernelSets(opt Options) kernelSet {
	read := func(path string) (cpuset.CPUSet, bool) {
		data, err := os.ReadFile(path)
		if err != nil {
			return cpuset.New(), false
		}
		set, err := cpulist.Parse(string(data))
		return set, err == nil // nohz_full reads "(null)" on kernels without it
	}
	cpuDir := filepath.Join(opt.SysfsRoot, "sys/devices/system/cpu")
	var k kernelSet
	k.isolated, _ = read(filepath.Join(cpuDir, "isolated"))
	k.nohzFull, _ = read(filepath.Join(cpuDir, "nohz_full"))
	k.online, k.onlineKnown = read(filepath.Join(cpuDir, "online"))
	k.present, k.presentKnown = read(filepath.Join(cpuDir, "present"))
	if opt.CgroupRoot != "" {
		k.partition, k.partitionKnown = read(filepath.Join(opt.CgroupRoot, "cpuset.cpus.isolated"))
	}
	return k
}

func readPower(sysfsRoot string, c int) Power {
	dir := filepath.Join(sysfsRoot, "sys/devices/system/cpu", "cpu"+strconv.Itoa(c))
	text := func(rel string) string {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(data))
	}
	p := Power{ResumeLatencyUS: text("power/pm_qos_resume_latency_us"), Governor: text("cpufreq/scaling_governor"),
		MinKHz: text("cpufreq/scaling_min_freq"), MaxKHz: text("cpufreq/scaling_max_freq"), CurKHz: text("cpufreq/scaling_cur_freq")}
	states, _ := filepath.Glob(filepath.Join(dir, "cpuidle", "state*"))
	slices.SortFunc(states, func(a, b string) int { return stateIndex(a) - stateIndex(b) })
	for _, s := range states {
		rel, _ := filepath.Rel(dir, s)
		p.IdleStates = append(p.IdleStates, IdleState{Name: text(filepath.Join(rel, "name")), Disabled: text(filepath.Join(rel, "disable")) == "1"})
	}
	return p
}

func stateIndex(path string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(path), "state"))
	return n
}

// task is one thread allowed on a held CPU.
type task struct {
	pid, tid int
	comm     string
	allowed  cpuset.CPUSet
	kernel   bool
	// pinned: userland may not change its affinity (PF_NO_SETAFFINITY).
	pinned bool
	cgroup string
}

// owner tells whether the thread belongs to the container: a whole
// component of one of its cgroup paths (/proc/<pid>/cgroup: one line on
// cgroup v2, one per hierarchy on v1) names the container, as each
// runtime and cgroup driver does (containerInCgroup). A component that
// merely contains the id is another process's: CRI-O's conmon runs in
// crio-conmon-<id>.scope, outside the container, on CPUs the container
// does not hold.
func (t task) owner(containerID string) bool {
	if containerID == "" {
		return false
	}
	for _, path := range procfs.CgroupPaths(t.cgroup) {
		if containerInCgroup(path, containerID) {
			return true
		}
	}
	return false
}

// containerInCgroup tells whether a component of a cgroup path is the
// container's own cgroup: <id> (containerd's cgroupfs driver,
// /kubepods/<qos>/pod<uid>/<id>), crio-<id> (CRI-O's cgroupfs driver),
// crio-<id>.scope (CRI-O's systemd driver, whose processes may sit in a
// child such as .../crio-<id>.scope/container) and
// cri-containerd-<id>.scope (containerd's systemd driver). On cgroup v1
// these are the same paths under each controller.
func containerInCgroup(path, id string) bool {
	for _, c := range strings.Split(path, "/") {
		switch c {
		case id, "crio-" + id, "crio-" + id + ".scope", "cri-containerd-" + id + ".scope":
			return true
		}
	}
	return false
}

// readThreads lists every thread allowed on one of the CPUs. Processes and
// threads that exit while it reads are skipped.
func readThreads(procRoot string, cpus cpuset.CPUSet) ([]task, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []task
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		pdir := filepath.Join(procRoot, e.Name())
		st, err := procfs.ReadStat(filepath.Join(pdir, "stat"))
		if err != nil {
			continue // gone since listed
		}
		cgroup, _ := os.ReadFile(filepath.Join(pdir, "cgroup"))
		tasks, err := os.ReadDir(filepath.Join(pdir, "task"))
		if err != nil {
			continue
		}
		for _, te := range tasks {
			tid, err := strconv.Atoi(te.Name())
			if err != nil {
				continue
			}
			comm, allowed, ok := readStatus(filepath.Join(pdir, "task", te.Name(), "status"))
			if !ok || allowed.Intersection(cpus).IsEmpty() {
				continue
			}
			out = append(out, task{pid: pid, tid: tid, comm: comm, allowed: allowed, kernel: st.Kernel(), pinned: st.Pinned(), cgroup: string(cgroup)})
		}
	}
	return out, nil
}

// readStatus reads Name and Cpus_allowed_list of a task's status.
func readStatus(path string) (comm string, allowed cpuset.CPUSet, ok bool) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return "", cpuset.New(), false
	}
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Name":
			comm = strings.TrimSpace(v)
		case "Cpus_allowed_list":
			allowed, err = cpulist.Parse(v)
			found = err == nil
		}
	}
	return comm, allowed, found
}
