// Package atomicfile replaces a file so that a reader, or the program after
// a crash, sees the old content or the new, never a mix: the data goes to a
// temporary file beside it, which is then renamed over it. The state file
// and the kubelet grants file are both written this way.
//
// Durability is the caller's choice: a rename survives a crash of the
// process without any sync, and survives a power loss only once the file
// and its directory are synced (Replace with durable, or Sync later).
package atomicfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// tempSuffix follows the file's name in its temporary files:
// state.json.tmp-123 for state.json.
const tempSuffix = ".tmp-*"

// CreateTemp creates a temporary file beside path, for a Pending to rename
// over it.
func CreateTemp(path string) (*os.File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tempSuffix)
	if err != nil {
		return nil, stepError("creating a temporary file for", path, err)
	}
	return tmp, nil
}

// stepError is the error of a step of replacing path: it names path and the
// step, and wraps the step's own error (an errno, for errors.Is) without the
// name of the temporary file. That name is random, different at every
// attempt and gone when anyone reads the log: in the message it made each
// retry of the same failure (ENOSPC, EDQUOT, EIO) read as a new one, and
// defeated the callers that log the same failure once a minute.
func stepError(step, path string, err error) error {
	var pathErr *os.PathError
	var linkErr *os.LinkError
	switch {
	case errors.As(err, &pathErr):
		err = pathErr.Err
	case errors.As(err, &linkErr):
		err = linkErr.Err
	}
	return &os.PathError{Op: step, Path: path, Err: err}
}

// Replace writes data over path atomically, mode 0600, creating its
// directory (mode 0700) if needed. With durable, the file is fsynced before
// the rename and its directory after it.
func Replace(path string, data []byte, durable bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := CreateTemp(path)
	if err != nil {
		return err
	}
	pending := &Pending{File: tmp}
	defer pending.Cleanup()
	return pending.Replace(path, data, durable)
}

// Pending is a temporary file on its way to replace another, after
// renameio's PendingFile: whatever step fails, one deferred Cleanup closes
// and removes it, and after the rename Cleanup does nothing.
type Pending struct {
	*os.File
	closed, renamed bool
}

// Replace writes data into the temporary file (mode 0600) and renames it
// over path; with durable, the file is fsynced before the rename and the
// directory after it. A failed step stops the rename; its error names
// path and the step (an *os.PathError with path as its Path), the same at
// every attempt.
func (t *Pending) Replace(path string, data []byte, durable bool) error {
	if err := t.Chmod(0o600); err != nil {
		return stepError("setting the mode of the temporary file for", path, err)
	}
	if _, err := t.Write(data); err != nil {
		return stepError("writing the temporary file for", path, err)
	}
	if durable {
		if err := t.Sync(); err != nil {
			return stepError("syncing the temporary file for", path, err)
		}
	}
	t.closed = true
	if err := t.File.Close(); err != nil {
		return stepError("closing the temporary file for", path, err)
	}
	if err := os.Rename(t.Name(), path); err != nil {
		return stepError("renaming the temporary file over", path, err)
	}
	t.renamed = true
	if durable {
		return SyncDir(filepath.Dir(path))
	}
	return nil
}

// Cleanup closes and removes the temporary file unless Replace got that far.
func (t *Pending) Cleanup() {
	if !t.closed {
		t.File.Close()
	}
	if !t.renamed {
		os.Remove(t.Name())
	}
}

// Sync makes a replaced file durable: fdatasync of the file, then fsync of
// the directory that holds the rename.
func Sync(path string) error {
	if err := Fdatasync(path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// Fdatasync makes a file's data and size durable, not its timestamps.
func Fdatasync(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	if err := unix.Fdatasync(int(file.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: path, Err: err}
	}
	return nil
}

// SyncDir makes the renames in a directory durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// RemoveStale deletes the temporary files a crash left beside path, and
// those matching legacy, glob patterns of names in path's directory that
// earlier releases gave their temporary files (so that an upgrade cleans
// up after the version it replaces). Nothing may be writing path.
func RemoveStale(path string, legacy ...string) {
	patterns := []string{path + tempSuffix}
	for _, l := range legacy {
		patterns = append(patterns, filepath.Join(filepath.Dir(path), l))
	}
	for _, pattern := range patterns {
		stale, _ := filepath.Glob(pattern)
		for _, s := range stale {
			os.Remove(s)
		}
	}
}

// ReadJSON reads into v a JSON file that Replace wrote (a status file: a
// reader sees the old or the new one whole); ok is false when there is
// none. Only a regular file is read (ReadRegular): a named pipe there is
// an error, not a read that waits for a writer.
func ReadJSON(path string, v any) (ok bool, err error) {
	return ReadJSONLimit(path, NoLimit, v)
}

// ErrTooLarge is (with errors.Is) the error of ReadRegular and
// ReadJSONLimit for a file larger than its limit.
var ErrTooLarge = errors.New("file too large")

// TooLargeError is a file larger than a bounded read allows.
type TooLargeError struct {
	Path string
	// Size is the file's size in bytes, or -1 when it is not known (a
	// file whose size the kernel does not say, as in /proc, or one that
	// grew while read): then only that it has more than Limit.
	Size  int64
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("%s: more than %d bytes, the most read of it; not read", e.Path, e.Limit)
	}
	return fmt.Sprintf("%s: %d bytes, larger than the %d bytes read of it at most; not read", e.Path, e.Size, e.Limit)
}

func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ReadJSONLimit is ReadJSON for a file that may hold at most limit bytes
// (any size with NoLimit): a larger one (not the file its reader expects:
// another program's, a runaway writer's) is an error naming it, its size
// and the limit, and is not read into memory whole. Only a regular file is
// read (ReadRegular): anything else (a named pipe, a device, a socket, a
// directory) is an error naming it and what it is, said before it is
// opened to read. The callers read under the daemon's lock or at its
// start, where waiting for a writer that never comes is a hang.
func ReadJSONLimit(path string, limit int64, v any) (ok bool, err error) {
	data, err := ReadRegular(path, limit)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}
