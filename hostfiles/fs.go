package hostfiles

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// FS is the file access the package needs; OS is the real one. Tests use
// others to inject kernel errors and to stop a "process" at any step.
type FS interface {
	// ReadFile reads a whole file.
	ReadFile(path string) ([]byte, error)
	// WriteFile writes data to an existing host file in one write call, as
	// the kernel wants for /proc and /sys files; it never creates a file.
	WriteFile(path string, data []byte) error
	// ReplaceFile replaces a file of the plugin's own durably: after it
	// returns, the file holds data even if the machine loses power, and at
	// no instant does it hold anything but the old or the new data.
	ReplaceFile(path string, data []byte) error
	// Rename moves a file aside (a journal that cannot be read).
	Rename(from, to string) error
}

// OS is the host's file system.
type OS struct{}

var _ FS = OS{}

// ReadFile reads a whole file, as os.ReadFile does (its errors are the
// same *fs.PathError of "open" or "read" around the errno), with
// open(2), read(2) and close(2) themselves: a pass reads some files at
// every pass (a partition's cpuset.cpus.partition, Verify), and
// os.ReadFile made five objects per read (an *os.File and its file, a
// FileInfo for the size, the path's bytes, a buffer of the size sysfs
// gives every file, 4 KiB) where this makes two, the path's bytes and a
// buffer the size of what host files hold (issue 45: a pass's
// allocations grew with the partitions). Unlike os.ReadFile it does not
// size its buffer from fstat: a sysfs file (which stats as 4096) longer
// than 512 bytes is read in pieces, which the kernel serves from one
// buffered rendering (seq_file), so the pieces agree; a larger regular
// file (the journal, once at start) is read with a few more copies. On a
// read error it returns no data, where os.ReadFile returns what it had
// read; no caller uses that.
func (OS) ReadFile(path string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	data := make([]byte, 0, 512)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := syscall.Read(fd, data[len(data):cap(data)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n <= 0 {
			return data, nil
		}
		data = data[:len(data)+n]
	}
}

// WriteFile writes an existing file with one write(2). O_TRUNC is accepted
// (and ignored) by procfs and sysfs, and makes fixture trees of regular
// files behave like them.
func (OS) WriteFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Rename renames a file.
func (OS) Rename(from, to string) error { return os.Rename(from, to) }

// ReplaceFile writes a temporary file in the same directory, fsyncs it,
// renames it over path and fsyncs the directory (internal/atomicfile, as
// the state file). Mode 0600.
func (OS) ReplaceFile(path string, data []byte) error {
	return atomicfile.Replace(path, data, true)
}

// Kind sorts a write error by what to do about it.
type Kind int

const (
	// Transient errors are retried with backoff.
	Transient Kind = iota
	// Gone means the file does not exist (any more): there is nothing to
	// change or to restore.
	Gone
	// Permanent errors are the kernel refusing this value for this file;
	// retrying the same value cannot help.
	Permanent
)

func (k Kind) String() string {
	switch k {
	case Gone:
		return "gone"
	case Permanent:
		return "permanent"
	}
	return "transient"
}

// Classify sorts an error from FS.WriteFile or FS.ReadFile.
//
//   - ENOENT, ENODEV, ENXIO: the file or its device is gone.
//   - EIO, EPERM, EACCES: the kernel does not let this file be changed
//     (/proc/irq/N/smp_affinity* of a kernel-managed IRQ returns EIO, newer
//     kernels EPERM); EROFS: the file system is read-only (a systemd unit
//     with ProtectKernelTunables= and no ReadWritePaths=); EINVAL,
//     EOVERFLOW, ERANGE: the kernel rejects the value (a mask wider than
//     the CPUs, a governor the driver lacks).
//   - Anything else (ENOSPC when a CPU's interrupt vectors are used up,
//     EBUSY, EAGAIN, EINTR, ENOMEM) may pass: transient.
func Classify(err error) Kind {
	if errors.Is(err, fs.ErrNotExist) {
		return Gone
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return Transient
	}
	switch errno {
	case syscall.ENOENT, syscall.ENODEV, syscall.ENXIO:
		return Gone
	case syscall.EIO, syscall.EPERM, syscall.EACCES, syscall.EROFS, syscall.EINVAL, syscall.EOVERFLOW, syscall.ERANGE:
		return Permanent
	}
	return Transient
}

// errnoOf is the errno inside err, 0 if there is none.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}
