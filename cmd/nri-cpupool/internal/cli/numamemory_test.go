package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
