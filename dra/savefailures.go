package dra

import "time"

// saveFailureLogEvery is how often the same failure to write the claims
// file, or a CDI spec, in Prepare is logged again.
const saveFailureLogEvery = time.Minute

// saveFailures coalesces the log of Prepares that failed because a file
// could not be written: the claims file (Driver.saveFailures) or a claim's
// CDI spec (Driver.cdiFailures). The kubelet retries every Prepare, and
// while the state directory stays read-only (a claims file that could not
// be moved aside), or the CDI directory unwritable, every retry fails the
// same way. Each distinct error is logged, the same one again once a
// minute with the number not logged since, and the first write that
// succeeds says how many failed. Errors are told apart by their text:
// atomicfile's name the file and the step, never the random temporary
// file, so a retry failing the same way reads the same. Guarded by
// prepareMu.
type saveFailures struct {
	// failed counts the failures since the last write that succeeded,
	// unlogged those since the last one logged.
	failed, unlogged int
	// last is the error last logged, at loggedAt.
	last     string
	loggedAt time.Time
}

// fail records a failure at now and tells whether to log it, and how many
// failures before it were not logged.
func (f *saveFailures) fail(err error, now time.Time) (log bool, unlogged int) {
	return f.failAs(err.Error(), now)
}

// failAs is fail for an error told apart by msg: its text without what
// differs between failures that are the same (a claim's UID).
func (f *saveFailures) failAs(msg string, now time.Time) (log bool, unlogged int) {
	f.failed++
	if msg != f.last || now.Sub(f.loggedAt) >= saveFailureLogEvery {
		unlogged, f.unlogged = f.unlogged, 0
		f.last, f.loggedAt = msg, now
		return true, unlogged
	}
	f.unlogged++
	return false, 0
}

// succeed records a write that succeeded and returns how many failed
// before it.
func (f *saveFailures) succeed() (failed int) {
	failed = f.failed
	*f = saveFailures{}
	return failed
}
