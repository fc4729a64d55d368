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

// DirLock is a held state directory lock, or, when its file could not be
// opened at all, the note that the daemon runs without one (Warning).
type DirLock struct {
	f    *os.File
	path string
	// created is what taking the lock created: the lock file, then the
	// directories MkdirAll made, deepest first (CloseUnused).
	created []string
	// warning says how the lock is weaker than asked: taken on a
	// read-only descriptor, or not taken at all.
	warning string
}

// ErrLocked is returned by TryLock when another process holds the lock.
// "Holds" means for longer than lockSettle: a shorter hold is a status
// probe (Held), not a daemon.
var ErrLocked = errors.New("the state directory is locked by another nri-cpupool")

// TryLock takes the lock of stateFile's directory if it is free. When
// another process holds it, the error wraps ErrLocked and names the holder.
// It waits up to lockSettle before saying so (see flock), so a lock that
// is really held costs that long to find out.
//
// A state directory that cannot be written (a read-only disk, a full one)
// never stops the daemon: pinning does not depend on a writable disk
// (docs/state.md). The lock file is then opened read-only, which flock
// needs no more than, so a second daemon is still kept out; and when the
// file cannot even be opened (it does not exist and cannot be created),
// the lock is returned untaken, with a Warning to log: two daemons could
// then overlap, which is less harm than none pinning at all.
func TryLock(stateFile string) (*DirLock, error) {
	path := LockPath(stateFile)
	for {
		l, err := tryLockOnce(path)
		if !errors.Is(err, errReplaced) {
			return l, err
		}
	}
}

// errReplaced: the file locked is no longer the one at the lock's path.
var errReplaced = errors.New("lock file removed or replaced while locking it")

func tryLockOnce(path string) (*DirLock, error) {
	f, readOnly, created, err := openLock(path)
	if err != nil {
		return &DirLock{path: path, warning: fmt.Sprintf("state directory lock %s cannot be opened (%v): running without it, so a second nri-cpupool on this state directory is not kept out; make the directory writable (StateDirectory=, the DaemonSet's hostPath) and restart", path, err)}, nil
	}
	return lockOpened(f, path, readOnly, created)
}

// lockOpened locks f, the file openLock opened at path.
func lockOpened(f *os.File, path string, readOnly bool, created []string) (*DirLock, error) {
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s, held by %s)", ErrLocked, path, Holder(path))
		}
		return nil, fmt.Errorf("state directory lock %s: %w", path, err)
	}
	// A holder that gave up an unused directory (CloseUnused) removed the
	// file it held; a process that opened it before that holds a lock on
	// a file no one else will open, and tries again on the path's file.
	if !samePath(f, path) {
		f.Close()
		return nil, errReplaced
	}
	l := &DirLock{f: f, path: path, created: created}
	if readOnly {
		l.warning = fmt.Sprintf("state directory lock %s is on a read-only file system or not writable: locked through a read-only descriptor, so a second nri-cpupool still waits, but the file cannot say who holds it", path)
		return l, nil
	}
	// Who holds it, for the next process's message; the lock holds
	// without it.
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d, since %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	}
	return l, nil
}

// samePath tells whether f is still the file at path.
func samePath(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(held, now)
}

// openLock opens the lock file read-write, creating it (and its
// directory) if needed, or read-only when it exists but cannot be written
// (readOnly). created lists what it made: the file, then the directories,
// deepest first.
func openLock(path string) (f *os.File, readOnly bool, created []string, err error) {
	dirs := missingDirs(filepath.Dir(path))
	mkErr := os.MkdirAll(filepath.Dir(path), 0o700)
	if mkErr != nil {
		dirs = nil
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f, false, append([]string{path}, dirs...), nil
	}
	if errors.Is(err, os.ErrExist) {
		f, err = os.OpenFile(path, os.O_RDWR, 0o600)
	}
	if err == nil {
		return f, false, dirs, nil
	}
	if mkErr != nil {
		err = mkErr // the directory's problem: it says more
	}
	rf, rerr := os.Open(path)
	if rerr != nil {
		return nil, false, nil, err // the read-write error: why it is not writable
	}
	return rf, true, nil, nil
}

// missingDirs lists dir and its ancestors that do not exist, deepest
// first.
func missingDirs(dir string) []string {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			return missing
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			return missing
		}
	}
}

// lockSettle is how long flock keeps trying a lock another process holds
// before it calls the lock held, and lockRetry how often. `nri-cpupool
// status` and explain probe the lock (Held) with a shared lock they drop
// microseconds later; a one-shot TryLock (restore-host, a runtime-launched
// plugin moving its lock) that met one would otherwise say a daemon runs
// when none does. A daemon holds the lock for its whole life, so waiting
// this little longer never turns a held lock into a free one.
const (
	lockSettle = 50 * time.Millisecond
	lockRetry  = time.Millisecond
)

// flock takes an exclusive lock on f without blocking on a holder, but
// tries again for lockSettle while one holds it: EWOULDBLOCK then means a
// process kept it for that long.
func flock(f *os.File) error {
	deadline := time.Now().Add(lockSettle)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK) && time.Now().Before(deadline):
			time.Sleep(lockRetry)
			continue
		}
		return err
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

// Held tells whether a process holds the lock of stateFile's directory,
// for `nri-cpupool status` to tell a daemon that runs from a status file
// a dead one left. known is false when it cannot tell (no lock file, or
// one it cannot open). It only opens the file read-only and takes a shared
// lock for an instant: a process trying the lock at that instant tries
// again for lockSettle (flock), so it does not take the probe for a daemon.
func Held(stateFile string) (held, known bool) {
	f, err := os.Open(LockPath(stateFile))
	if err != nil {
		return false, false
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return false, true // closing the file drops the shared lock
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, true
	}
	return false, false
}

// Path is the lock file's path.
func (l *DirLock) Path() string { return l.path }

// Warning says, for the log, how the lock is weaker than an exclusive
// lock on a file that names its holder: empty when it is not.
func (l *DirLock) Warning() string {
	if l == nil {
		return ""
	}
	return l.warning
}

// Close releases the lock. The file stays, so that the next process's
// message can name its last holder.
func (l *DirLock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// CloseUnused releases a lock on a directory the daemon did not use (a
// runtime-launched plugin takes the lock of its default state directory,
// then the runtime's configuration names another) and removes what taking
// it created, the lock file and its directories, so that such a node
// keeps no empty /var/lib/nri-cpupool. The file goes while still locked: a
// process waiting on it then finds it gone and locks the path's new one
// (TryLock's samePath), so no two processes ever hold the lock at once.
func (l *DirLock) CloseUnused() error {
	if l == nil || l.f == nil {
		return nil
	}
	for i, p := range l.created {
		if i == 0 && p == l.path {
			if samePath(l.f, p) {
				os.Remove(p) //nolint:errcheck // best effort: an unused lock file harms no one
			}
			continue
		}
		if os.Remove(p) != nil {
			break // not empty (another file was put there) or not ours to remove
		}
	}
	return l.Close()
}
