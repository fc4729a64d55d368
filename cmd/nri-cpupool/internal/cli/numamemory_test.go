package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cpupool/nri-cpupool/state"
)

// TestMemoryAmount: round amounts as Kubernetes writes them, the kernel's
// odd ones to a tenth of a GiB, never rounded up (a free figure must not
// promise more than there is).
func TestMemoryAmount(t *testing.T) {
	for in, want := range map[int64]string{
		0:               "0",
		64 << 20:        "64Mi",
		4 << 30:         "4Gi",
		4032 << 20:      "3.9Gi",
		2944 << 20:      "2.8Gi",
		65842732 << 10:  "62.7Gi",
		1536<<20 + 1:    "1.5Gi",
		(1<<20)*3 + 512: "3Mi",
		1023 << 30:      "1023Gi",
		1536:            "1536",
	} {
		assert.Equal(t, want, memoryAmount(in), "%d", in)
	}
}

// TestPrintNUMAMemory: a node whose MemTotal the kernel does not tell says
// so, and a hugepage size nobody has, reserves or holds is left out.
func TestPrintNUMAMemory(t *testing.T) {
	var b strings.Builder
	held := int64(2 << 30)
	printNUMAMemory(&b, "HEADING", []state.NUMAMemory{{Node: 2, Memory: state.NUMAMemoryBytes{Held: held},
		HugePages: []state.NUMAHugePages{{Size: "2Mi"}, {Size: "1Gi", Total: 8, Held: 2, Free: 6}}}})
	assert.Equal(t, `HEADING `+numaMemoryLegend+`
NUMA NODE  RESOURCE       HELD  FREE     RESERVED  TOTAL
2          memory         2Gi   unknown  0         unknown
2          hugepages-1Gi  2     6        0         8
`, b.String())
	b.Reset()
	printNUMAMemory(&b, "HEADING", nil)
	assert.Empty(t, b.String(), "a file without the figures prints nothing")
}
