package plugin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordedKeysBoundedWhenManyAreNear (review 59e): recordedKeys
// takes the near keys first; with more near keys than maxRecordedKeys
// (twelve one-edit names of "web", "wec".."wen") it still keeps 8, each once, all
// near, sorted.
func TestRecordedKeysBoundedWhenManyAreNear(t *testing.T) {
	ann := map[string]string{}
	for i := range 12 {
		ann[fmt.Sprintf("pool.cpupool.dev/container.we%c", 'c'+i)] = "shared"
	}
	for i := range 3 {
		ann[fmt.Sprintf("pool.cpupool.dev/container.zz%d", i)] = "shared"
	}
	others := otherContainerKeys(ann, "web")
	near := nearKeys(others, "web")
	require.Len(t, near, 12)
	keys := strings.Split(recordedKeys(near, others), ",")
	assert.Len(t, keys, maxRecordedKeys)
	seen := map[string]bool{}
	for _, k := range keys {
		assert.False(t, seen[k], "key %s kept twice", k)
		seen[k] = true
		assert.NotContains(t, k, "container.zz", "a far key was kept over a near one")
	}
	assert.IsIncreasing(t, keys)
}

// TestRecordedKeysKeepNearOnce (review 59e): two near keys among twelve:
// each kept once, with the first six far ones.
func TestRecordedKeysKeepNearOnce(t *testing.T) {
	ann := map[string]string{"pool.cpupool.dev/container.wec": "shared", "pool.cpupool.dev/container.wed": "shared"}
	for i := range 10 {
		ann[fmt.Sprintf("pool.cpupool.dev/container.zz%d", i)] = "shared"
	}
	others := otherContainerKeys(ann, "web")
	near := nearKeys(others, "web")
	require.Len(t, near, 2)
	assert.Equal(t, "pool.cpupool.dev/container.wec,pool.cpupool.dev/container.wed,pool.cpupool.dev/container.zz0,"+
		"pool.cpupool.dev/container.zz1,pool.cpupool.dev/container.zz2,pool.cpupool.dev/container.zz3,"+
		"pool.cpupool.dev/container.zz4,pool.cpupool.dev/container.zz5", recordedKeys(near, others))
}
