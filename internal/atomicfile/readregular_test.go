package atomicfile

import (
	"os"
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

// TestEveryReadRefusesAFIFO: the state file, the grants and the DRA claims
// are read with Load, the status files with ReadJSON; a named pipe at any
// of them hung the reader (os.ReadFile) as it did the record. Load takes
// it for an unreadable file and moves it aside; ReadJSON refuses it.
func TestEveryReadRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	at := time.Date(2026, 12, 7, 1, 2, 3, 4, time.UTC)
	within := func(name string, f func()) {
		t.Helper()
		require.NoError(t, syscall.Mkfifo(path, 0o600))
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatalf("%s(%s) still blocked after 2s on a FIFO with no writer", name, path)
		}
	}

	var d *Discarded
	within("Load", func() { d = Load(path, at, os.Rename, func([]byte) error { return nil }) })
	require.NotNil(t, d, "a pipe is no usable file")
	assert.Equal(t, KindUnreadable, d.Kind)
	assert.ErrorIs(t, d.Problem, ErrNotRegular)
	assert.NoError(t, d.Unmoved)
	assert.Equal(t, path+": cannot be read: "+path+": a named pipe, not a regular file; not read; moved to "+path+".unreadable-20261207T010203.000000004Z", d.String())
	fi, err := os.Lstat(d.Aside)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeNamedPipe, "the pipe itself is moved aside")
	assert.NoFileExists(t, path)

	var ok bool
	within("ReadJSON", func() {
		var v map[string]any
		ok, err = ReadJSON(path, &v)
	})
	assert.False(t, ok)
	assert.ErrorIs(t, err, ErrNotRegular)
}

// TestReadRegularReadsWholeOrUpToTheLimit: NoLimit reads a file whole; a
// limit refuses a larger one; a missing file is fs.ErrNotExist; a device
// is refused as one.
func TestReadRegularReadsWholeOrUpToTheLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	_, err := ReadRegular(path, NoLimit)
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, os.WriteFile(path, []byte("0123456789"), 0o600))
	data, err := ReadRegular(path, NoLimit)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(data))
	data, err = ReadRegular(path, 10)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(data))
	_, err = ReadRegular(path, 9)
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = ReadRegular("/dev/null", NoLimit)
	assert.EqualError(t, err, "/dev/null: a character device, not a regular file; not read")
}
