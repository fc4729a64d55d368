package plugin

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRecordedKeysKeepTheTypo (review 59d): a pod with nine
// sidecars, each with its own container-scoped key, and a typo
// "container.wbe" for container "web". The creation's warning sees the
// typo (typoCandidates looks at 16 keys), but the record keeps only the
// first 8 keys in sorted order, all of them correct, so explain cannot
// name the typo.
func TestRecordedKeysKeepTheTypo(t *testing.T) {
	ann := map[string]string{"pool.cpupool.dev/container.wbe": "exclusive"}
	for i := range 9 {
		ann[fmt.Sprintf("pool.cpupool.dev/container.a%d", i)] = "shared"
	}
	others := otherContainerKeys(ann, "web")
	near := nearKeys(others, "web")
	assert.Len(t, near, 1, "the creation's warning names the typo")
	assert.Contains(t, recordedKeys(near, others), "pool.cpupool.dev/container.wbe", "the record explain reads keeps the typo")
}
