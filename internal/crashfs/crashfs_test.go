package crashfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDiesBeforeOrAfter: the CrashAt-th mutating call dies before it is
// performed, or after with After; every later one fails unperformed.
func TestDiesBeforeOrAfter(t *testing.T) {
	for _, after := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "f")
		require.NoError(t, os.WriteFile(path, []byte("0"), 0o644))
		f := &FS{CrashAt: 2, After: after}
		require.NoError(t, f.WriteFile(path, []byte("1")))
		assert.False(t, f.Crashed())
		assert.ErrorIs(t, f.WriteFile(path, []byte("2")), ErrKilled)
		assert.True(t, f.Crashed())
		assert.ErrorIs(t, f.WriteFile(path, []byte("3")), ErrKilled)
		data, err := f.ReadFile(path)
		require.NoError(t, err, "reads never kill")
		want := map[bool]string{false: "1", true: "2"}[after]
		assert.Equal(t, want, string(data), "after: %v", after)
		assert.Equal(t, 2, f.Mutations())
		assert.Equal(t, map[bool]int{false: 1, true: 2}[after], f.Writes(path))
	}
}
