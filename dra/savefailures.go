package dra

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// saveFailureLogEvery is how often the same failure to write the claims
// file, or a CDI spec, in Prepare is logged again.
const saveFailureLogEvery = time.Minute

// saveFailureKinds bounds the kinds of failure a saveFailures remembers
// between two writes that succeed: a failure whose text is new at every
// retry is a new kind each time, and is logged each time, but must not
// grow the memory. A few kinds at most fail at once (a full disk, a
// read-only directory, an EIO); the one logged longest ago is forgotten
// first, and is merely logged again when it returns; its failures not
// yet logged are said by the line of the kind that made it forgotten.
const saveFailureKinds = 16

// saveFailures coalesces the log of Prepares that failed because a file
// could not be written: the claims file (Driver.saveFailures) or a claim's
// CDI spec (Driver.cdiFailures). The kubelet retries every Prepare, and
// while the state directory stays read-only (a claims file that could not
// be moved aside), or the CDI directory unwritable, every retry fails the
// same way. Each kind of failure is logged at once, the same kind again
// once a minute with the number of its own not logged since, and the first
// write that succeeds says how many failed. Kinds are remembered each on
// its own: told apart by the last failure only, a write failing two ways
// by turns (ENOSPC then EIO then ENOSPC) logged every change, that is
// every retry. Guarded by prepareMu.
type saveFailures struct {
	// failed counts the failures since the last write that succeeded.
	failed int
	// kinds holds each kind of failure since then (failureKind), at most
	// saveFailureKinds of them.
	kinds map[string]failureLog
}

// failureLog is when a kind of failure was last logged and how many of
// it failed since without being logged.
type failureLog struct {
	loggedAt time.Time
	unlogged int
}

// fail records a failure at now and tells whether to log it, and how many
// failures of its kind before it were not logged, with those of a kind it
// made forgotten (failures of forgotten kinds).
func (f *saveFailures) fail(err error, now time.Time) (log bool, unlogged int) {
	return f.failAs(failureKind(err), now)
}

// failAs is fail for a failure of the given kind: failureKind of its
// error, or its text without what differs between failures that are the
// same (a claim's UID).
func (f *saveFailures) failAs(kind string, now time.Time) (log bool, unlogged int) {
	f.failed++
	k, seen := f.kinds[kind]
	if seen && now.Sub(k.loggedAt) < saveFailureLogEvery {
		k.unlogged++
		f.kinds[kind] = k
		return false, 0
	}
	if f.kinds == nil {
		f.kinds = map[string]failureLog{}
	}
	// A kind forgotten with failures not yet logged: no line of its own
	// will say them (when it returns it is new), so this line says them,
	// and every failure is said by one line.
	forgotten := 0
	if !seen && len(f.kinds) >= saveFailureKinds {
		forgotten = f.forgetOldest()
	}
	f.kinds[kind] = failureLog{loggedAt: now}
	return true, k.unlogged + forgotten
}

// forgetOldest forgets the kind of failure logged longest ago and returns
// how many failures of it were not logged.
func (f *saveFailures) forgetOldest() (unlogged int) {
	oldest, first := "", true
	for kind, k := range f.kinds {
		if first || k.loggedAt.Before(f.kinds[oldest].loggedAt) {
			oldest, first = kind, false
		}
	}
	unlogged = f.kinds[oldest].unlogged
	delete(f.kinds, oldest)
	return unlogged
}

// succeed records a write that succeeded and returns how many failed
// before it.
func (f *saveFailures) succeed() (failed int) {
	failed = f.failed
	*f = saveFailures{}
	return failed
}

// failureKind tells failures apart that are logged on their own. A failed
// step on a file (atomicfile's errors are *os.PathErrors naming the file
// and the step, never the random temporary file; a rename's an
// *os.LinkError) is its step, its file(s) and its errno, whatever context
// is wrapped around it; any other error is its text.
func failureKind(err error) string {
	var pathErr *os.PathError
	var linkErr *os.LinkError
	switch {
	case errors.As(err, &pathErr):
		return "path\x00" + pathErr.Op + "\x00" + pathErr.Path + "\x00" + errnoKind(pathErr.Err)
	case errors.As(err, &linkErr):
		return "link\x00" + linkErr.Op + "\x00" + linkErr.Old + "\x00" + linkErr.New + "\x00" + errnoKind(linkErr.Err)
	}
	return err.Error()
}

// errnoKind is the errno of a step's error, or its text when it has none.
func errnoKind(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return "errno " + strconv.Itoa(int(errno))
	}
	return err.Error()
}
