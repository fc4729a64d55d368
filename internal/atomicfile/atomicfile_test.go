package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func temps(t *testing.T, path string) []string {
	t.Helper()
	found, err := filepath.Glob(path + tempSuffix)
	require.NoError(t, err)
	return found
}

func TestReplace(t *testing.T) {
	for _, durable := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "sub", "file.json")
		require.NoError(t, Replace(path, []byte("one"), durable), "creates the directory")
		require.NoError(t, Replace(path, []byte("two"), durable))
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "two", string(data))
		info, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
		dir, err := os.Stat(filepath.Dir(path))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), dir.Mode().Perm())
		assert.Empty(t, temps(t, path), "durable %v: no temporary file left behind", durable)
		require.NoError(t, Sync(path))
	}
}

// TestFailedReplaceKeepsTheOldFile: a rename that fails (a directory is in
// the way) removes the temporary file and leaves what was there.
func TestFailedReplaceKeepsTheOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file.json")
	require.NoError(t, os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700))
	for _, durable := range []bool{false, true} {
		err := Replace(path, []byte("new"), durable)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "renaming the temporary file over "+path)
		assert.Empty(t, temps(t, path))
		assert.DirExists(t, filepath.Join(path, "in-the-way"))
	}
}

// TestFailedStepErrorNamesThePathNotTheTemporaryFile: a step that fails
// gives the same error at every attempt, naming the file replaced and the
// step, and keeps the errno for errors.Is. The random name of the
// temporary file in it made every retry of the same failure (ENOSPC,
// EDQUOT, EIO) look new to the callers that log it once a minute
// (dra's saveFailures), and named a file gone when the log is read.
func TestFailedStepErrorNamesThePathNotTheTemporaryFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file.json")
	require.NoError(t, os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700))
	first := Replace(path, []byte("new"), false)
	require.Error(t, first)
	again := Replace(path, []byte("new"), false)
	assert.Equal(t, first.Error(), again.Error(), "the same failure reads the same at every attempt")
	assert.NotContains(t, first.Error(), ".tmp-")
	var pathErr *os.PathError
	require.ErrorAs(t, first, &pathErr)
	assert.Equal(t, path, pathErr.Path)
	var errno syscall.Errno
	assert.ErrorAs(t, first, &errno, "the errno is kept: %v", first)

	// A step before the rename (here every one fails: the file is closed).
	var texts []string
	for range 2 {
		tmp, err := CreateTemp(path + ".d")
		require.NoError(t, err)
		tmp.Close()
		pending := &Pending{File: tmp}
		err = pending.Replace(path+".d", []byte("x"), true)
		pending.Cleanup()
		require.Error(t, err)
		assert.ErrorIs(t, err, os.ErrClosed)
		texts = append(texts, err.Error())
	}
	assert.Equal(t, texts[0], texts[1])
	assert.Equal(t, "setting the mode of the temporary file for "+path+".d: "+os.ErrClosed.Error(), texts[0])
}

// TestPendingCleanupAfterAFailedWrite: the temporary file of a Replace that
// failed before the rename goes with Cleanup, and Cleanup after a
// successful Replace removes nothing.
func TestPendingCleanupAfterAFailedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file.json")
	tmp, err := CreateTemp(path)
	require.NoError(t, err)
	tmp.Close() // every step before the rename fails
	pending := &Pending{File: tmp}
	require.Error(t, pending.Replace(path, []byte("x"), false))
	pending.Cleanup()
	assert.Empty(t, temps(t, path))
	assert.NoFileExists(t, path)

	tmp, err = CreateTemp(path)
	require.NoError(t, err)
	pending = &Pending{File: tmp}
	require.NoError(t, pending.Replace(path, []byte("x"), false))
	pending.Cleanup()
	assert.FileExists(t, path)
}

// TestRemoveStale: the temporary files of path, and those matching the
// legacy patterns, go; everything else stays.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "grants.json")
	for _, name := range []string{"grants.json", "grants.json.tmp-1", ".grants-2", "other.json.tmp-3", ".other-4"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o600))
	}
	RemoveStale(path, ".grants-*")
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"grants.json", "other.json.tmp-3", ".other-4"}, names)
}

func TestFdatasyncOfAMissingFile(t *testing.T) {
	err := Fdatasync(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestReadJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status.json")
	var v struct{ State string }
	ok, err := ReadJSON(path, &v)
	require.NoError(t, err)
	assert.False(t, ok, "no file")

	require.NoError(t, Replace(path, []byte(`{"State": "serving"}`), false))
	ok, err = ReadJSON(path, &v)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "serving", v.State)

	require.NoError(t, Replace(path, []byte(`{"State": `), false))
	_, err = ReadJSON(path, &v)
	require.ErrorContains(t, err, path+": unexpected end of JSON input")
}

// TestReadJSONLimit: a file of at most the limit reads as ReadJSON reads
// it; a larger one is an error naming the file, its size and the limit
// (ErrTooLarge), and v is left alone.
func TestReadJSONLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record.json")
	var v struct{ State string }
	ok, err := ReadJSONLimit(path, 32, &v)
	require.NoError(t, err)
	assert.False(t, ok, "no file")

	exact := `{"State": "serving"}` + strings.Repeat(" ", 12) // 32 bytes
	require.Len(t, exact, 32)
	require.NoError(t, Replace(path, []byte(exact), false))
	ok, err = ReadJSONLimit(path, 32, &v)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "serving", v.State)

	require.NoError(t, Replace(path, []byte(`{"State": "other"}`+strings.Repeat(" ", 15)), false)) // 33 bytes
	ok, err = ReadJSONLimit(path, 32, &v)
	assert.False(t, ok)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.EqualError(t, err, path+": 33 bytes, larger than the 32 bytes read of it at most; not read")
	assert.Equal(t, "serving", v.State, "nothing of a refused file is decoded")

	// A regular file whose size is not known beforehand (/proc says 0) is
	// read up to the limit and no further.
	if st, err := os.Stat("/proc/self/status"); err == nil && st.Size() == 0 {
		_, err = ReadJSONLimit("/proc/self/status", 32, &v)
		require.ErrorIs(t, err, ErrTooLarge)
		assert.EqualError(t, err, "/proc/self/status: more than 32 bytes, the most read of it; not read")
	}

	// What is not a regular file is not read at all: a device may never
	// end, and a named pipe blocks its open until someone writes.
	if _, err := os.Stat("/dev/zero"); err == nil {
		_, err = ReadJSONLimit("/dev/zero", 32, &v)
		require.ErrorIs(t, err, ErrNotRegular)
		assert.EqualError(t, err, "/dev/zero: a character device, not a regular file; not read")
	}
	_, err = ReadJSONLimit(filepath.Dir(path), 32, &v)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.EqualError(t, err, filepath.Dir(path)+": a directory, not a regular file; not read")

	require.NoError(t, Replace(path, []byte(`{"State": `), false))
	_, err = ReadJSONLimit(path, 32, &v)
	require.ErrorContains(t, err, path+": unexpected end of JSON input")
}
