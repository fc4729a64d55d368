package housekeeping

// Thread affinities as files of the journal: each thread housekeeping
// confines by affinity is a path below AffinityRoot,
// AffinityRoot/<tid>/<starttime>, that AffinityFS reads with
// sched_getaffinity and writes with sched_setaffinity, as SystemdFS
// serves the units' properties. The reconciler then records the original
// affinity durably before the first change, restores it exactly when no
// longer wanted, also by the next process after a kill -9, and counts the
// kernel's refusals (EINVAL, EPERM) like a file's.
//
// The path names the thread's start time (field 22 of /proc/<tid>/stat,
// in clock ticks since boot) as well as its id: the kernel reuses thread
// ids, and a record must never give one thread's original to another.
// A thread that is gone, or whose id now names a thread started at
// another time, reads and writes as ENOENT: gone, nothing to restore.

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/procfs"
)

// AffinityRoot is where the journal keeps thread affinities:
// AffinityRoot/<tid>/<starttime>. No file system has it; AffinityFS
// serves it through the kernel's system calls.
const AffinityRoot = "/affinity"

// AffinityPath is the journal's path of a thread's affinity.
func AffinityPath(tid int, start uint64) string {
	return path.Join(AffinityRoot, strconv.Itoa(tid), strconv.FormatUint(start, 10))
}

// IsAffinityPath tells whether p names a thread's affinity (AffinityRoot).
func IsAffinityPath(p string) bool {
	return p == AffinityRoot || strings.HasPrefix(path.Clean(p), AffinityRoot+"/")
}

// AffinityThread is the thread of a path below AffinityRoot: its id and
// start time.
func AffinityThread(p string) (tid int, start uint64, ok bool) {
	rel, found := strings.CutPrefix(path.Clean(p), AffinityRoot+"/")
	if !found {
		return 0, 0, false
	}
	t, s, found := strings.Cut(rel, "/")
	if !found {
		return 0, 0, false
	}
	tid, err1 := strconv.Atoi(t)
	start, err2 := strconv.ParseUint(s, 10, 64)
	return tid, start, err1 == nil && err2 == nil && tid > 0
}

// AffinityFS is a hostfiles.FS that serves the paths below AffinityRoot
// as threads' affinities (CPU lists) and every other path through FS.
type AffinityFS struct {
	hostfiles.FS
	procRoot string
	kernel   Affinity
}

// NewAffinityFS serves AffinityRoot through kernel, checking each
// thread's start time in procRoot; every other path through fsys.
func NewAffinityFS(fsys hostfiles.FS, procRoot string, kernel Affinity) *AffinityFS {
	return &AffinityFS{FS: fsys, procRoot: procRoot, kernel: kernel}
}

// same tells whether tid is still the thread that started at start.
func (f *AffinityFS) same(tid int, start uint64) bool {
	st, err := procfs.ReadStat(filepath.Join(f.procRoot, strconv.Itoa(tid), "stat"))
	return err == nil && st.Start == start
}

// ReadFile reads a thread's affinity as a CPU list, or a host file.
func (f *AffinityFS) ReadFile(p string) ([]byte, error) {
	tid, start, ok := AffinityThread(p)
	if !ok {
		if IsAffinityPath(p) {
			return nil, &pathError{op: "read", path: p, err: syscall.ENOENT}
		}
		return f.FS.ReadFile(p)
	}
	if !f.same(tid, start) {
		return nil, &pathError{op: "read", path: p, err: syscall.ENOENT}
	}
	cpus, err := f.kernel.Get(tid)
	if err == nil && !f.same(tid, start) {
		err = syscall.ENOENT // the thread ended, its id taken, while read
	}
	if err != nil {
		return nil, &pathError{op: "read", path: p, err: affinityErrno(err)}
	}
	return []byte(cpus.String()), nil
}

// WriteFile sets a thread's affinity from a CPU list, or writes a host
// file. The start time is checked before the call: a thread id reused
// between the check and the call (microseconds) is the one race left.
func (f *AffinityFS) WriteFile(p string, data []byte) error {
	tid, start, ok := AffinityThread(p)
	if !ok {
		if IsAffinityPath(p) {
			return &pathError{op: "write", path: p, err: syscall.ENOENT}
		}
		return f.FS.WriteFile(p, data)
	}
	cpus, err := cpulist.Parse(strings.TrimSpace(string(data)))
	if err != nil || cpus.IsEmpty() {
		return &pathError{op: "write", path: p, err: fmt.Errorf("%w: not a CPU list: %q", syscall.EINVAL, strings.TrimSpace(string(data)))}
	}
	if !f.same(tid, start) {
		return &pathError{op: "write", path: p, err: syscall.ENOENT}
	}
	if err := f.kernel.Set(tid, cpus); err != nil {
		return &pathError{op: "write", path: p, err: affinityErrno(err)}
	}
	return nil
}

// affinityErrno maps ESRCH (no such thread) to ENOENT, which the
// reconciler takes as gone; every other error is kept.
func affinityErrno(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return syscall.ENOENT
	}
	return err
}

// ServesAffinity tells whether fsys serves AffinityRoot: an AffinityFS,
// or a SystemdFS over one.
func ServesAffinity(fsys hostfiles.FS) bool {
	switch f := fsys.(type) {
	case *AffinityFS:
		return true
	case *SystemdFS:
		return ServesAffinity(f.FS)
	}
	return false
}
