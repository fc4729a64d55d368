package irq

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Interrupt is one row of /proc/interrupts.
type Interrupt struct {
	// ID is the IRQ number ("24") or the architecture's name of a per-CPU
	// interrupt ("LOC", "NMI", "RES").
	ID string
	// Counts are the interrupts each CPU handled since boot, by CPU id;
	// CPUs the row has no column for are absent.
	Counts map[int]uint64
	// Description is the rest of the row: chip, hardware IRQ, trigger and
	// the actions' names ("PCI-MSI 512000-edge virtio0-input.0").
	Description string
}

// Numbered tells whether the row is a device IRQ with a /proc/irq/N
// directory, as opposed to an architectural per-CPU interrupt.
func (i Interrupt) Numbered() bool {
	_, err := strconv.Atoi(i.ID)
	return err == nil
}

// maxInterruptRows bounds what is read of /proc/interrupts (a node has a
// few thousand rows at most).
const maxInterruptRows = 1 << 16

// ParseInterrupts parses /proc/interrupts: a header naming the online
// CPUs' columns ("CPU0 CPU1 CPU3"), then one row per interrupt with a
// count per column (some rows, such as ERR and MIS, have a single count).
func ParseInterrupts(data []byte) ([]Interrupt, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	if !sc.Scan() {
		return nil, fmt.Errorf("/proc/interrupts: empty")
	}
	var cpus []int
	for _, f := range strings.Fields(sc.Text()) {
		id, err := strconv.Atoi(strings.TrimPrefix(f, "CPU"))
		if !strings.HasPrefix(f, "CPU") || err != nil || id < 0 {
			return nil, fmt.Errorf("/proc/interrupts: header field %q is not CPU<n>", f)
		}
		cpus = append(cpus, id)
	}
	var out []Interrupt
	for sc.Scan() {
		line := sc.Text()
		id, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(id) == "" {
			continue
		}
		if len(out) == maxInterruptRows {
			return nil, fmt.Errorf("/proc/interrupts: more than %d rows", maxInterruptRows)
		}
		fields := strings.Fields(rest)
		irq := Interrupt{ID: strings.TrimSpace(id), Counts: make(map[int]uint64, len(cpus))}
		n := 0
		for n < len(fields) && n < len(cpus) {
			v, err := strconv.ParseUint(fields[n], 10, 64)
			if err != nil {
				break
			}
			irq.Counts[cpus[n]] = v
			n++
		}
		irq.Description = strings.Join(fields[n:], " ")
		out = append(out, irq)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("/proc/interrupts: %w", err)
	}
	return out, nil
}

// Delta is what fired between two readings of /proc/interrupts.
type Delta struct {
	Interrupt
	// Fired are the interrupts per CPU between the readings (only CPUs
	// where some fired).
	Fired map[int]uint64
}

// Deltas compares two readings: the rows whose counts grew, with how much
// per CPU. A row absent before (an IRQ requested meanwhile) counts from 0.
func Deltas(before, after []Interrupt) []Delta {
	old := make(map[string]Interrupt, len(before))
	for _, i := range before {
		old[i.ID] = i
	}
	var out []Delta
	for _, i := range after {
		prev := old[i.ID]
		d := Delta{Interrupt: i, Fired: map[int]uint64{}}
		for cpu, n := range i.Counts {
			if p := prev.Counts[cpu]; n > p {
				d.Fired[cpu] = n - p
			}
		}
		if len(d.Fired) > 0 {
			out = append(out, d)
		}
	}
	return out
}
