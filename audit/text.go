package audit

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints the report for people: one block per held CPU, its
// verdict first.
func WriteText(w io.Writer, rep *Report) error {
	var b strings.Builder
	if len(rep.CPUs) == 0 {
		b.WriteString("no exclusive CPU is held\n")
	}
	for _, c := range rep.CPUs {
		verdict := "clean"
		if !c.Clean {
			verdict = "NOT CLEAN"
		}
		fmt.Fprintf(&b, "CPU %d  %s (%s)  %s\n", c.CPU, c.Owner, c.Pool, verdict)
		for _, p := range c.Problems {
			fmt.Fprintf(&b, "  - %s\n", p)
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
		if len(c.Threads) > 0 {
			var ts []string
			for _, t := range c.Threads {
				ts = append(ts, describeThread(t))
			}
			more := ""
			if n := c.ForeignThreads - len(c.Threads); n > 0 {
				more = fmt.Sprintf(" and %d more", n)
			}
			fmt.Fprintf(&b, "  threads: %s%s\n", strings.Join(ts, ", "), more)
		}
		if len(c.KernelThreads) > 0 {
			var ts []string
			for _, t := range c.KernelThreads {
				ts = append(ts, describeThread(t))
			}
			more := ""
			if n := c.UnboundKernelThreads - len(c.KernelThreads); n > 0 {
				more = fmt.Sprintf(" and %d more", n)
			}
			fmt.Fprintf(&b, "  unbound kernel threads: %s%s\n", strings.Join(ts, ", "), more)
		}
		partition := "unknown"
		if c.IsolatedPartition != nil {
			partition = yesNo(*c.IsolatedPartition)
		}
		fmt.Fprintf(&b, "  kernel: domain-isolated %s, isolated partition %s, nohz_full %s; %d per-CPU and %d unbound kernel threads\n",
			yesNo(c.DomainIsolated), partition, yesNo(c.NohzFull), c.PerCPUKernelThreads, c.UnboundKernelThreads)
		if s := c.Power.describe(); s != "" {
			fmt.Fprintf(&b, "  power: %s\n", s)
		}
	}
	if len(rep.CPUs) > 0 {
		if rep.Clean {
			b.WriteString("every held exclusive CPU is clean\n")
		} else {
			b.WriteString("some held exclusive CPUs are not clean\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// describeThread is "pid/tid comm (allowed: why)".
func describeThread(t Thread) string {
	if t.Reason == "" {
		return fmt.Sprintf("%d/%d %s (%s)", t.PID, t.TID, t.Comm, t.Allowed)
	}
	return fmt.Sprintf("%d/%d %s (%s: %s)", t.PID, t.TID, t.Comm, t.Allowed, t.Reason)
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
