package state

// The state directory's lock: one daemon at a time writes the files of a
// state directory (the state, the host-originals journal, the grants, the
// DRA claims). Two processes overlap in a rolling update with maxSurge, or
// when a package upgrade starts the new daemon before the old one is gone;
// both writing would lose records, and both registered with the runtime
// under one name make it refuse every container they both adjust (NRI's
// "plugins … both tried to set" conflict). The new process waits for the
// lock before it reads anything, and takes over when the old one exits,
// even by kill -9: the kernel drops an flock with its last descriptor.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockFile is the lock's name in the state directory.
const LockFile = "nri-cpupool.lock"

// LockPath is the lock of the state directory a state file is in.
func LockPath(stateFile string) string {
	return filepath.Join(filepath.Dir(stateFile), LockFile)
}

// lockPoll is how often a waiting process tries the lock again: the
// runtime has no plugin for at most this long after the holder exits.
const lockPoll = 5 * time.Millisecond

// DirLock is a held state directory lock.
type DirLock struct {
	f    *os.File
	path string
}

// ErrLocked is returned by TryLock when another process holds the lock.
var ErrLocked = errors.New("the state directory is locked by another nri-cpupool")

// TryLock takes the lock of stateFile's directory if it is free. When
// another process holds it, the error wraps ErrLocked and names the holder.
func TryLock(stateFile string) (*DirLock, error) {
	path := LockPath(stateFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s, held by %s)", ErrLocked, path, Holder(path))
		}
		return nil, fmt.Errorf("state directory lock %s: %w", path, err)
	}
	l := &DirLock{f: f, path: path}
	// Who holds it, for the next process's message; the lock holds
	// without it.
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d, since %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	}
	return l, nil
}

func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// Lock takes the lock of stateFile's directory, waiting while another
// process holds it; waiting is called once, with the holder's description,
// before the wait. It returns ctx's error if ctx ends first.
func Lock(ctx context.Context, stateFile string, waiting func(holder string)) (*DirLock, error) {
	told := false
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		l, err := TryLock(stateFile)
		if !errors.Is(err, ErrLocked) {
			return l, err
		}
		if !told && waiting != nil {
			waiting(Holder(LockPath(stateFile)))
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the state directory lock %s: %w", LockPath(stateFile), ctx.Err())
		case <-t.C:
		}
	}
}

// Holder describes the process that wrote the lock file last ("pid 42,
// since 2026-12-02T03:00:00Z"), or says that it is not known.
func Holder(lockPath string) string {
	b, err := os.ReadFile(lockPath)
	s := strings.TrimSpace(string(b))
	if err != nil || s == "" || len(s) > 200 {
		return "a process that did not say which"
	}
	return s
}

// Path is the lock file's path.
func (l *DirLock) Path() string { return l.path }

// Close releases the lock. The file stays: removing it would let a waiter
// lock a file that a third process then creates anew beside it.
func (l *DirLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
