package housekeeping

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSeesHostThreads(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       bool
	}{
		{"host: kthreadd", "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n", true},
		{"a container's PID 2: a user process", "2 (sh) S 1 2 2 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 900 0 0\n", false},
		{"no PID 2", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.stat != "" {
				require.NoError(t, os.MkdirAll(filepath.Join(root, "2"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, "2", "stat"), []byte(tc.stat), 0o644))
			}
			assert.Equal(t, tc.want, SeesHostThreads(root))
		})
	}
}
