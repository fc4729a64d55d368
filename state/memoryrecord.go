package state

// The memory record of a container or hold (ContainerState.Memory): what
// it holds by NUMA node, its memory in bytes and its hugepages by size,
// as one comparable string ("1:memory=1073741824,2048kB=16;3:2048kB=4"),
// so that a record stays a value the state writer compares. The plugin
// writes it and reads it back at a restart; `nri-cpupool explain` shows
// it. Both read it here, so that the format has one reader.

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// HeldMemory is what a record says one NUMA node holds: Memory in bytes,
// HugePages by page size, in ascending size.
type HeldMemory struct {
	Node      int
	Memory    int64
	HugePages []HeldPages
}

// HeldPages is a count of hugepages of one size.
type HeldPages struct {
	SizeKB int64
	Count  int64
}

// Bounds of a record: a node has at most a few hundred NUMA nodes and a
// handful of page sizes, and 1 PiB is beyond any node (nothing overflows
// below it).
const (
	maxMemoryRecord = 4096
	maxMemoryNode   = 1 << 16
	maxMemoryAmount = int64(1) << 50
)

// MemoryRecord builds a record in one buffer, with no string per part:
// the plugin makes one in the reply of every creation whose memory it
// counts. Node starts a node's part; Memory and HugePages add to it.
type MemoryRecord struct {
	b []byte
	// amounts: the node's part has an amount already (the next one
	// follows a comma).
	amounts bool
}

// NewMemoryRecord starts a record of about nodes nodes.
func NewMemoryRecord(nodes int) MemoryRecord {
	return MemoryRecord{b: make([]byte, 0, 48*nodes)}
}

// Node starts the part of NUMA node node.
func (r *MemoryRecord) Node(node int) {
	if len(r.b) > 0 {
		r.b = append(r.b, ';')
	}
	r.b = strconv.AppendInt(r.b, int64(node), 10)
	r.b = append(r.b, ':')
	r.amounts = false
}

// Memory adds the node's memory in bytes.
func (r *MemoryRecord) Memory(bytes int64) {
	r.separate()
	r.b = strconv.AppendInt(append(r.b, "memory="...), bytes, 10)
}

// HugePages adds the node's count of hugepages of sizeKB.
func (r *MemoryRecord) HugePages(sizeKB, count int64) {
	r.separate()
	r.b = strconv.AppendInt(r.b, sizeKB, 10)
	r.b = strconv.AppendInt(append(r.b, "kB="...), count, 10)
}

func (r *MemoryRecord) separate() {
	if r.amounts {
		r.b = append(r.b, ',')
	}
	r.amounts = true
}

// String is the record.
func (r *MemoryRecord) String() string { return string(r.b) }

// ParseMemory reads a record; anything malformed is an error that names
// the part (the plugin then derives the holdings again from the runtime).
func ParseMemory(record string) ([]HeldMemory, error) {
	if record == "" {
		return nil, nil
	}
	if len(record) > maxMemoryRecord {
		return nil, fmt.Errorf("memory record of %d bytes", len(record))
	}
	var out []HeldMemory
	for _, part := range strings.Split(record, ";") {
		node, rest, ok := strings.Cut(part, ":")
		n, err := strconv.Atoi(node)
		if !ok || err != nil || n < 0 || n > maxMemoryNode {
			return nil, fmt.Errorf("memory record %s: bad node", cpulist.Echo(part))
		}
		held := HeldMemory{Node: n}
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(kv, "=")
			val, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil || val < 0 || val > maxMemoryAmount {
				return nil, fmt.Errorf("memory record %s: bad amount", cpulist.Echo(part))
			}
			if k == "memory" {
				held.Memory = val
				continue
			}
			size, err := strconv.ParseInt(strings.TrimSuffix(k, "kB"), 10, 64)
			if !strings.HasSuffix(k, "kB") || err != nil || size <= 0 {
				return nil, fmt.Errorf("memory record %s: bad page size", cpulist.Echo(part))
			}
			held.HugePages = append(held.HugePages, HeldPages{SizeKB: size, Count: val})
		}
		slices.SortFunc(held.HugePages, func(a, b HeldPages) int { return cmp.Compare(a.SizeKB, b.SizeKB) })
		out = append(out, held)
	}
	return out, nil
}
