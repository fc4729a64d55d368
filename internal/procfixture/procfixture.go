// Package procfixture writes /proc trees for tests, with the files and
// formats of a real kernel for what the plugin reads and writes: IRQ
// directories (/proc/irq/N/smp_affinity_list, effective_affinity_list,
// node), /proc/irq/default_smp_affinity (a hex mask in the kernel's width),
// /proc/interrupts (a column per online CPU), the boot id, and processes
// with threads (comm, environ, stat flags, status with Cpus_allowed_list).
//
// A fixture is regular files: writes stick as written, and nothing fails
// the way a kernel refuses a managed IRQ; tests that need refusals wrap
// the file access (hostfiles.FS).
package procfixture

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// Spec describes a node's /proc.
type Spec struct {
	// CPUs are the online CPUs (the columns of /proc/interrupts).
	CPUs cpuset.CPUSet
	// PossibleCPUs sizes the hex masks (nr_cpu_ids); 0: the highest online
	// CPU + 1.
	PossibleCPUs int
	// DefaultAffinity is default_smp_affinity as a list; nil: every CPU.
	DefaultAffinity *cpuset.CPUSet
	IRQs            []IRQ
	// Arch are per-CPU interrupts without /proc/irq entries (LOC, NMI).
	Arch      []IRQ
	BootID    string
	Processes []Process
}

// IRQ is one interrupt.
type IRQ struct {
	// N is the IRQ number; Name the architecture's name for Arch rows.
	N    int
	Name string
	// Affinity is smp_affinity_list; effective_affinity_list is its first
	// CPU, as x86 APIC routing chooses one, unless Effective says.
	Affinity cpuset.CPUSet
	// Effective, when not empty, is effective_affinity_list as written:
	// a CPU list the affinity may leave out (a move the kernel deferred)
	// or text that is no list. NoEffective leaves the file out, as a
	// kernel without CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK does.
	Effective   string
	NoEffective bool
	// Node is the device's NUMA node, -1 when the kernel has none.
	Node int
	// Description is the end of its /proc/interrupts row.
	Description string
	// Counts per CPU in /proc/interrupts.
	Counts map[int]uint64
}

// Process is a process with its threads.
type Process struct {
	PID     int
	Comm    string
	Environ []string
	// Kernel marks a kernel thread (PF_KTHREAD in stat's flags).
	Kernel bool
	// NoSetAffinity marks a thread whose affinity only the kernel sets
	// (PF_NO_SETAFFINITY: per-CPU kthreads, workqueue workers).
	NoSetAffinity bool
	// Threads are its tasks; the first is the main thread (TID = PID)
	// when empty, allowed on AllowedCPUs.
	Threads     []Thread
	AllowedCPUs cpuset.CPUSet
	// Cgroup is /proc/<pid>/cgroup ("0::/kubepods/pod1/<id>").
	Cgroup string
}

// Thread is one task.
type Thread struct {
	TID         int
	Comm        string
	AllowedCPUs cpuset.CPUSet
}

// The kernel's task flags: PF_KTHREAD, PF_NO_SETAFFINITY.
const (
	pfKthread       = 0x00200000
	pfNoSetAffinity = 0x04000000
)

// Write creates the tree under dir and returns dir.
func Write(t testing.TB, dir string, s Spec) string {
	t.Helper()
	w := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	possible := s.PossibleCPUs
	if possible == 0 && s.CPUs.Size() > 0 {
		possible = s.CPUs.List()[s.CPUs.Size()-1] + 1
	}
	def := s.CPUs
	if s.DefaultAffinity != nil {
		def = *s.DefaultAffinity
	}
	w("irq/default_smp_affinity", Mask(def, possible)+"\n")
	for _, irq := range s.IRQs {
		d := filepath.Join("irq", strconv.Itoa(irq.N))
		w(filepath.Join(d, "smp_affinity_list"), irq.Affinity.String()+"\n")
		w(filepath.Join(d, "smp_affinity"), Mask(irq.Affinity, possible)+"\n")
		eff := irq.Effective
		if eff == "" && irq.Affinity.Size() > 0 {
			eff = strconv.Itoa(irq.Affinity.List()[0])
		}
		if !irq.NoEffective {
			w(filepath.Join(d, "effective_affinity_list"), eff+"\n")
		}
		w(filepath.Join(d, "node"), strconv.Itoa(irq.Node)+"\n")
	}
	w("interrupts", Interrupts(s.CPUs, append(slices.Clone(s.IRQs), s.Arch...)))
	if s.BootID != "" {
		w("sys/kernel/random/boot_id", s.BootID+"\n")
	}
	for _, p := range s.Processes {
		pd := strconv.Itoa(p.PID)
		w(filepath.Join(pd, "comm"), p.Comm+"\n")
		env := ""
		for _, kv := range p.Environ {
			env += kv + "\x00"
		}
		w(filepath.Join(pd, "environ"), env)
		w(filepath.Join(pd, "cgroup"), p.Cgroup+"\n")
		threads := p.Threads
		if len(threads) == 0 {
			threads = []Thread{{TID: p.PID, Comm: p.Comm, AllowedCPUs: p.AllowedCPUs}}
		}
		flags := 0
		if p.Kernel {
			flags = pfKthread
		}
		if p.NoSetAffinity {
			flags |= pfNoSetAffinity
		}
		w(filepath.Join(pd, "stat"), stat(p.PID, p.Comm, flags))
		w(filepath.Join(pd, "status"), status(p.Comm, p.PID, p.PID, threads[0].AllowedCPUs))
		for _, th := range threads {
			td := filepath.Join(pd, "task", strconv.Itoa(th.TID))
			w(filepath.Join(td, "comm"), th.Comm+"\n")
			w(filepath.Join(td, "stat"), stat(th.TID, th.Comm, flags))
			w(filepath.Join(td, "status"), status(th.Comm, p.PID, th.TID, th.AllowedCPUs))
		}
	}
	return dir
}

// Mask formats a set as the kernel prints a cpumask of possible CPUs:
// hex, 32-bit groups, most significant first, comma-separated, the first
// group only as wide as the CPUs left.
func Mask(set cpuset.CPUSet, possible int) string {
	digits := max(1, (possible+3)/4)
	nibbles := make([]byte, digits)
	for _, id := range set.List() {
		if id/4 < digits {
			nibbles[id/4] |= 1 << (id % 4)
		}
	}
	var b strings.Builder
	for i := digits - 1; i >= 0; i-- {
		b.WriteByte("0123456789abcdef"[nibbles[i]])
		if i > 0 && i%8 == 0 {
			b.WriteByte(',')
		}
	}
	return b.String()
}

// Interrupts formats /proc/interrupts.
func Interrupts(cpus cpuset.CPUSet, irqs []IRQ) string {
	var b strings.Builder
	b.WriteString("    ")
	for _, c := range cpus.List() {
		fmt.Fprintf(&b, "       CPU%-3d", c)
	}
	b.WriteString("\n")
	for _, irq := range irqs {
		id := irq.Name
		if id == "" {
			id = strconv.Itoa(irq.N)
		}
		fmt.Fprintf(&b, "%4s:", id)
		for _, c := range cpus.List() {
			fmt.Fprintf(&b, " %10d", irq.Counts[c])
		}
		fmt.Fprintf(&b, "   %s\n", irq.Description)
	}
	return b.String()
}

func stat(pid int, comm string, flags int) string {
	// Fields after comm: state ppid pgrp session tty_nr tpgid flags ...
	return fmt.Sprintf("%d (%s) S 2 0 0 0 -1 %d 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n", pid, comm, flags)
}

func status(comm string, tgid, pid int, allowed cpuset.CPUSet) string {
	return fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t1\n"+
		"Cpus_allowed:\t%s\nCpus_allowed_list:\t%s\nMems_allowed_list:\t0\nvoluntary_ctxt_switches:\t1\n",
		comm, tgid, pid, Mask(allowed, max(8, allowed.Size())), allowed.String())
}
