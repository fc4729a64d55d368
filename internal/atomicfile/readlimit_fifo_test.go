package atomicfile

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A named pipe nobody writes, where a record is expected (present-cpus.json
// replaced by one, by mistake or on purpose): os.Open of it blocks until a
// writer comes, and the record is read at the daemon's start, under its
// lock at Configure, and by validate, which would all hang. It is refused
// before it is opened to read, with an error saying what it is.
func TestReadJSONLimitDoesNotHangOnAFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "present-cpus.json")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	done := make(chan error, 1)
	go func() {
		var v map[string]any
		_, err := ReadJSONLimit(path, 32, &v)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrNotRegular)
		assert.EqualError(t, err, path+": a named pipe, not a regular file; not read")
	case <-time.After(2 * time.Second):
		t.Fatalf("ReadJSONLimit(%s) still blocked after 2s on a FIFO with no writer", path)
	}
}
