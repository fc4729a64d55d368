package plugin

// A container's memory holdings in the state file: the record's format is
// package state's (state/memoryrecord.go), which `nri-cpupool explain`
// reads too; here the allocator's holdings become a record and back.

import (
	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/state"
)

// formatMemory runs in the reply of every creation whose memory is
// counted: it writes the record straight from the holdings.
func formatMemory(held []numamem.NodeMemory) string {
	if len(held) == 0 {
		return ""
	}
	rec := state.NewMemoryRecord(len(held))
	for _, nm := range held {
		rec.Node(nm.Node)
		if nm.Memory > 0 {
			rec.Memory(nm.Memory)
		}
		for _, p := range nm.HugePages {
			rec.HugePages(p.SizeKB, p.Count)
		}
	}
	return rec.String()
}

// parseMemory reads a record; anything malformed is an error, and the
// caller derives the holdings again from the runtime.
func parseMemory(s string) ([]numamem.NodeMemory, error) {
	held, err := state.ParseMemory(s)
	if err != nil || held == nil {
		return nil, err
	}
	out := make([]numamem.NodeMemory, len(held))
	for i, h := range held {
		out[i] = numamem.NodeMemory{Node: h.Node, Memory: h.Memory}
		for _, p := range h.HugePages {
			out[i].HugePages = append(out[i].HugePages, numamem.Pages{SizeKB: p.SizeKB, Count: p.Count})
		}
	}
	return out, nil
}
