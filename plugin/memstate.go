package plugin

// A container's memory holdings in the state file: by node, its memory in
// bytes and its hugepages by size, as one comparable string
// ("1:memory=1073741824,2048kB=16;3:2048kB=4"), so that a record stays a
// value the state writer compares.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cpupool/nri-cpupool/allocator"
)

// maxMemoryRecord bounds a record's holdings: a node has at most a few
// hundred NUMA nodes and a handful of page sizes.
const maxMemoryRecord = 4096

// formatMemory runs in the reply of every creation whose memory is
// counted: it appends to one buffer, with no string per part.
func formatMemory(held []allocator.NodeMemory) string {
	if len(held) == 0 {
		return ""
	}
	b := make([]byte, 0, 48*len(held))
	for i, nm := range held {
		if i > 0 {
			b = append(b, ';')
		}
		b = strconv.AppendInt(b, int64(nm.Node), 10)
		b = append(b, ':')
		sep := false
		if nm.Memory > 0 {
			b = strconv.AppendInt(append(b, "memory="...), nm.Memory, 10)
			sep = true
		}
		for _, p := range nm.HugePages {
			if sep {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, p.SizeKB, 10)
			b = strconv.AppendInt(append(b, "kB="...), p.Count, 10)
			sep = true
		}
	}
	return string(b)
}

// parseMemory reads formatMemory's form; anything malformed is an error,
// and the caller derives the holdings again from the runtime.
func parseMemory(s string) ([]allocator.NodeMemory, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > maxMemoryRecord {
		return nil, fmt.Errorf("memory record of %d bytes", len(s))
	}
	var out []allocator.NodeMemory
	for _, part := range strings.Split(s, ";") {
		node, rest, ok := strings.Cut(part, ":")
		n, err := strconv.Atoi(node)
		if !ok || err != nil || n < 0 || n > 1<<16 {
			return nil, fmt.Errorf("memory record %q: bad node", part)
		}
		nm := allocator.NodeMemory{Node: n}
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(kv, "=")
			val, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil || val < 0 || val > maxMemoryBytes {
				return nil, fmt.Errorf("memory record %q: bad amount", part)
			}
			if k == "memory" {
				nm.Memory = val
				continue
			}
			size, err := strconv.ParseInt(strings.TrimSuffix(k, "kB"), 10, 64)
			if !strings.HasSuffix(k, "kB") || err != nil || size <= 0 {
				return nil, fmt.Errorf("memory record %q: bad page size", part)
			}
			nm.HugePages = append(nm.HugePages, allocator.Pages{SizeKB: size, Count: val})
		}
		sortPages(nm.HugePages)
		out = append(out, nm)
	}
	return out, nil
}
