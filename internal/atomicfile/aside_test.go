package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadSetsAsideWhatItCannotUse: a missing file is nothing; a refused
// one is moved to .corrupt-<time>, an unreadable one to .unreadable-<time>;
// a file that cannot be moved stays until Move succeeds.
func TestLoadSetsAsideWhatItCannotUse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	at := time.Date(2026, 12, 7, 1, 2, 3, 4, time.UTC)
	refuse := func([]byte) error { return errors.New("bad") }
	assert.Nil(t, Load(path, at, os.Rename, refuse), "missing")

	require.NoError(t, os.WriteFile(path, []byte("ok"), 0o600))
	assert.Nil(t, Load(path, at, os.Rename, func([]byte) error { return nil }), "used")

	d := Load(path, at, os.Rename, refuse)
	require.NotNil(t, d)
	assert.Equal(t, KindCorrupt, d.Kind)
	assert.Equal(t, path+".corrupt-20261207T010203.000000004Z", d.Aside)
	assert.NoError(t, d.Unmoved)
	assert.FileExists(t, d.Aside)
	assert.NoFileExists(t, path)
	assert.Contains(t, d.String(), "bad; moved to "+d.Aside)

	require.NoError(t, os.Mkdir(path, 0o700))
	fail := true
	rename := func(from, to string) error {
		if fail {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EROFS}
		}
		return os.Rename(from, to)
	}
	d = Load(path, at, rename, refuse)
	require.NotNil(t, d)
	assert.Equal(t, KindUnreadable, d.Kind)
	assert.Contains(t, d.String(), "cannot be read")
	assert.Contains(t, d.String(), "could not be moved aside")
	err := d.Move(rename)
	assert.ErrorContains(t, err, "must first be moved to "+path+".unreadable-")
	assert.DirExists(t, path, "left as it is")
	fail = false
	require.NoError(t, d.Move(rename))
	assert.DirExists(t, d.Aside)
	assert.NoError(t, d.Move(rename), "moved once")
	var none *Discarded
	assert.NoError(t, none.Move(rename))
}

// TestNewestFindsTheLastFileSetAside: a restart reads back what an earlier
// start set aside, the newest by the time in its name, of either kind;
// other names beside it are not taken for one.
func TestNewestFindsTheLastFileSetAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	assert.Nil(t, Newest(path), "nothing set aside")
	assert.Nil(t, Newest(filepath.Join(dir, "missing", "f.json")), "no directory")
	for _, name := range []string{"f.json", "f.json.tmp-1", "f.json.corrupt-garbage", "f.json.other-20270101T000000.000000000Z", "g.json.corrupt-20270101T000000.000000000Z"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o600))
	}
	assert.Nil(t, Newest(path), "only the names Load gives count")

	at := time.Date(2026, 12, 7, 1, 2, 3, 4, time.UTC)
	older := Load(path, at, os.Rename, func([]byte) error { return errors.New("bad") })
	require.NotNil(t, older)
	require.NoError(t, os.Mkdir(path, 0o700))
	newer := Load(path, at.Add(time.Second), os.Rename, func([]byte) error { return nil })
	require.NotNil(t, newer)
	require.Equal(t, KindUnreadable, newer.Kind)

	got := Newest(path)
	require.NotNil(t, got)
	assert.Equal(t, newer.Aside, got.Aside)
	assert.Equal(t, KindUnreadable, got.Kind)
	assert.True(t, got.At.Equal(at.Add(time.Second)))
	assert.Equal(t, path, got.Path)
	assert.NoError(t, got.Unmoved)
	assert.ErrorContains(t, got.Problem, "unreadable at an earlier start")
}
