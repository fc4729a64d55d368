package atomicfile

// Reading only regular files: the daemon's files (the state, the kubelet
// grants, the DRA claims, the record of present CPUs, the status files) are
// read at its start, under its lock at Configure and by `status` and
// validate. os.ReadFile of a named pipe nobody writes blocks until a writer
// comes, and opening a device may never end or do something on open: a
// FIFO put where a file is expected (by mistake or on purpose) hung them
// all for good. One home for the check, so no reader goes without it.

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// NoLimit is the limit of ReadRegular for a file read whole whatever its
// size.
const NoLimit int64 = -1

// ErrNotRegular is (with errors.Is) the error of ReadRegular and of the
// reads built on it for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ReadRegular reads the whole of path, which must be a regular file of at
// most limit bytes (any size with NoLimit). Anything else (a named pipe, a
// device, a socket, a directory) is an error naming it and what it is
// (ErrNotRegular), said before it is opened to read; a larger file is a
// *TooLargeError and is not read into memory whole. A missing file is the
// error of os.Stat or os.Open, for errors.Is(err, fs.ErrNotExist).
func ReadRegular(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err == nil && !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	// A Stat that failed (a missing file) is said by the open below, as
	// os.ReadFile said it ("open …: no such file or directory"): scripts
	// and `status`/`explain` match that text. Non-blocking, in case path
	// was replaced by a named pipe since the Stat: the open then returns
	// at once and the Fstat below refuses it. A regular file's reads do
	// not heed the flag.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, notRegular(path, st.Mode())
	}
	var r io.Reader = f
	if limit >= 0 {
		if st.Size() > limit {
			return nil, &TooLargeError{Path: path, Size: st.Size(), Limit: limit}
		}
		r = io.LimitReader(f, limit+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if limit >= 0 && int64(len(data)) > limit {
		return nil, &TooLargeError{Path: path, Size: -1, Limit: limit}
	}
	return data, nil
}

// notRegular is the error of ReadRegular for path, of mode m, which is not
// a regular file: what it is, and that it was not read.
func notRegular(path string, m os.FileMode) error {
	kind := "not a regular file"
	switch {
	case m&os.ModeNamedPipe != 0:
		kind = "a named pipe"
	case m&os.ModeCharDevice != 0:
		kind = "a character device"
	case m&os.ModeDevice != 0:
		kind = "a block device"
	case m&os.ModeSocket != 0:
		kind = "a socket"
	case m.IsDir():
		kind = "a directory"
	}
	return fmt.Errorf("%s: %s, %w; not read", path, kind, ErrNotRegular)
}
