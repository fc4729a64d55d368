package hostfiles

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOSReadFile: OS.ReadFile reads what os.ReadFile reads, whatever the
// size (the empty file, one of a few bytes, one longer than its first
// buffer, procfs files), fails with the same errors (a file that is
// missing: Gone; a directory), and reads a small file with at most two
// allocations (issue 45: os.ReadFile makes five).
func TestOSReadFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"empty": "", "small": "isolated\n", "long": strings.Repeat("0-383,", 2000) + "\n", "exact": strings.Repeat("x", 512)}
	var paths []string
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		paths = append(paths, filepath.Join(dir, name))
	}
	for _, p := range []string{"/proc/sys/kernel/ostype", "/proc/filesystems"} {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		want, err := os.ReadFile(p)
		require.NoError(t, err)
		got, err := OS{}.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), p)
	}

	for _, c := range []struct {
		path, op string
		errno    syscall.Errno
		kind     Kind
	}{{filepath.Join(dir, "missing"), "open", syscall.ENOENT, Gone}, {dir, "read", syscall.EISDIR, Transient}} {
		_, want := os.ReadFile(c.path)
		_, err := OS{}.ReadFile(c.path)
		require.Error(t, err)
		assert.Equal(t, want.Error(), err.Error())
		var pe *fs.PathError
		require.True(t, errors.As(err, &pe), "%T", err)
		assert.Equal(t, c.op, pe.Op)
		assert.ErrorIs(t, err, c.errno)
		assert.Equal(t, c.kind, Classify(err), "%s", c.path)
	}

	small := filepath.Join(dir, "small")
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := (OS{}).ReadFile(small); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 2.0, "allocations to read a small file")
}
