package audit

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/cpupool/nri-cpupool/internal/plural"
)

// WriteText prints the report for people: one block per held CPU, its
// verdict first. The threads that may run on a CPU are summarised by kind,
// with a few examples; --json has each with its reason.
func WriteText(w io.Writer, rep *Report) error {
	var b strings.Builder
	if len(rep.CPUs) == 0 {
		b.WriteString("no exclusive CPU is held\n")
	}
	for _, c := range rep.CPUs {
		verdict := "clean"
		switch {
		case c.Unknown:
			verdict = "unknown"
		case !c.Clean:
			verdict = "NOT CLEAN"
		}
		fmt.Fprintf(&b, "CPU %d  %s (%s)  %s\n", c.CPU, c.Owner, c.Pool, verdict)
		for _, p := range c.Problems {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
		if c.Unknown {
			b.WriteString("  - nothing found, but the host's threads that may run on it cannot be seen here (see the note)\n")
		}
		if len(c.IRQs) > 0 {
			var irqs []string
			for _, i := range c.IRQs {
				s := fmt.Sprintf("%s ×%d", i.ID, i.Count)
				switch {
				case !i.Device:
				case i.Movable:
					s += fmt.Sprintf(" [%s, movable, affinity %s]", i.Description, i.Affinity)
				default:
					s += fmt.Sprintf(" [%s, not movable: %s]", i.Description, i.Reason)
				}
				irqs = append(irqs, s)
			}
			fmt.Fprintf(&b, "  interrupts in %s: %s\n", rep.Sample, strings.Join(irqs, "; "))
		}
		if len(c.PendingIRQMoves) > 0 {
			var irqs []string
			for _, m := range c.PendingIRQMoves {
				irqs = append(irqs, fmt.Sprintf("%s [%s]", m.ID, strings.TrimPrefix(fmt.Sprintf("%s, affinity %s, still routed to %s", m.Description, m.Affinity, m.Effective), ", ")))
			}
			fmt.Fprintf(&b, "  IRQs moved off it, still routed to it until they next fire (the kernel deferred the move; that one interrupt lands here, not judged): %s\n", strings.Join(irqs, "; "))
		}
		if c.ForeignThreads > 0 {
			fmt.Fprintf(&b, "  threads of other processes: %d\n", c.ForeignThreads)
			writeKinds(&b, c.ForeignKinds, c.Threads)
		}
		if len(c.KernelThreads) > 0 {
			counts := map[string]int{}
			for _, t := range c.KernelThreads {
				counts[t.Kind]++
			}
			listed := ""
			if len(c.KernelThreads) < c.UnboundKernelThreads {
				listed = fmt.Sprintf(" (by kind: the first %d)", len(c.KernelThreads))
			}
			fmt.Fprintf(&b, "  unbound kernel threads: %d%s\n", c.UnboundKernelThreads, listed)
			writeKinds(&b, counts, c.KernelThreads)
		}
		partition := "unknown"
		if c.IsolatedPartition != nil {
			partition = yesNo(*c.IsolatedPartition)
		}
		kthreads := fmt.Sprintf("%d per-CPU and %d unbound kernel threads", c.PerCPUKernelThreads, c.UnboundKernelThreads)
		if !rep.SeesHostThreads {
			kthreads = "kernel threads not visible here"
		}
		fmt.Fprintf(&b, "  kernel: domain-isolated %s, isolated partition %s, nohz_full %s; %s\n",
			yesNo(c.DomainIsolated), partition, yesNo(c.NohzFull), kthreads)
		for _, k := range []struct {
			use       *MaskUse
			what, key string
		}{{c.RPS, "receive packet steering masks (rps_cpus)", "kernelWork.receivePacketSteering"}, {c.Workqueues, "unbound workqueue masks", "kernelWork.workqueues"}} {
			if k.use != nil && !k.use.Kept {
				fmt.Fprintf(&b, "  %s naming it: %d (%s is off): %s\n", k.what, k.use.Count, k.key, strings.Join(k.use.Masks, ", "))
			}
		}
		if s := c.Power.describe(); s != "" {
			fmt.Fprintf(&b, "  power: %s\n", s)
		}
	}
	if slices.ContainsFunc(rep.CPUs, func(c CPU) bool { return c.ForeignThreads > 0 || len(c.KernelThreads) > 0 }) {
		b.WriteString("each thread and its own reason: nri-cpupool audit --json\n")
	}
	writeHostFiles(&b, rep.HostFiles)
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if len(rep.CPUs) > 0 {
		switch {
		case rep.Clean && hostFilesAmiss(rep.HostFiles) > 0:
			// Not "all is well": the files above are not as wanted.
			n := hostFilesAmiss(rep.HostFiles)
			fmt.Fprintf(&b, "every held exclusive CPU is clean, but %s not as the plugin wants (listed above)\n", plural.Verb(n, "1 host file is", fmt.Sprintf("%d host files are", n)))
		case rep.Clean:
			b.WriteString("every held exclusive CPU is clean\n")
		case slices.ContainsFunc(rep.CPUs, func(c CPU) bool { return !c.Clean && !c.Unknown }):
			b.WriteString("some held exclusive CPUs are not clean\n")
		default:
			b.WriteString("whether the held exclusive CPUs are clean is unknown: the host's threads cannot be seen here (see the note)\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// threadExamples is how many threads of a kind the text names; --json
// lists the first Options.MaxThreads of them with their own reason.
const threadExamples = 3

// kindSummary says for people, once per kind, why threads of that kind
// may still run on a held CPU; each thread's own reason (its cgroup, its
// affinity) is in --json.
var kindSummary = map[string]string{
	ForeignOwnAffinity:   "their own affinity includes it (pinned to kept CPUs, or set since housekeeping's last pass)",
	ForeignCgroup:        "their cgroup allows it: not confined (housekeeping off for this pool, or systemd's API unreachable)",
	ForeignRootCgroup:    "in the root cgroup, whose CPUs cannot be narrowed",
	ForeignIsolcpusReset: "on an isolcpus= CPU because their cgroup's cpuset (every CPU, once the runtime enabled the controller at the root) reset their affinity, and nothing balances a task off an isolated CPU: keepHostOffIsolcpus off, or its first pass has not run",
	ForeignNoCpuset:      "no cpuset confines them and their affinity is not narrowed (housekeeping off for this pool, or its first pass has not run)",
	ForeignRefused:       "the kernel refused to narrow their affinity",
	KernelManaged:        "the kernel manages their affinity (PF_NO_SETAFFINITY; workqueue workers follow the workqueue mask)",
	KernelUnbound:        "the kernel refused to narrow their affinity",
	KernelNotConfined:    "housekeeping has not narrowed them (off for this pool, or its first pass has not run)",
}

// writeKinds writes one line per kind, most threads first: the count, why
// and a few of the listed threads as examples. Every thread with the same
// long reason was one line each (issue 43).
func writeKinds(b *strings.Builder, counts map[string]int, listed []Thread) {
	kinds := slices.SortedFunc(maps.Keys(counts), func(x, y string) int {
		return cmp.Or(counts[y]-counts[x], strings.Compare(x, y))
	})
	for _, kind := range kinds {
		why := kindSummary[kind]
		if why == "" {
			why = "see --json"
		}
		var examples []string
		for _, t := range listed {
			if t.Kind == kind && len(examples) < threadExamples {
				examples = append(examples, fmt.Sprintf("%d/%d %s (%s)", t.PID, t.TID, t.Comm, t.Allowed))
			}
		}
		name := kind
		if name == "" {
			name = "unknown"
		}
		fmt.Fprintf(b, "    %d %s: %s", counts[kind], name, why)
		if len(examples) > 0 {
			fmt.Fprintf(b, "; e.g. %s", strings.Join(examples, ", "))
		}
		b.WriteString("\n")
	}
}

func (p Power) describe() string {
	var parts []string
	if p.Class != "" {
		parts = append(parts, "class "+p.Class)
	}
	if p.ResumeLatencyUS != "" {
		parts = append(parts, "resume latency limit "+p.ResumeLatencyUS+" µs (0: none)")
	}
	if len(p.IdleStates) > 0 {
		var s []string
		for _, st := range p.IdleStates {
			if st.Disabled {
				s = append(s, st.Name+" (disabled)")
			} else {
				s = append(s, st.Name)
			}
		}
		parts = append(parts, "idle states "+strings.Join(s, " "))
	}
	if p.Governor != "" {
		parts = append(parts, fmt.Sprintf("governor %s, %s-%s kHz (now %s)", p.Governor, p.MinKHz, p.MaxKHz, p.CurKHz))
	}
	return strings.Join(parts, "; ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
