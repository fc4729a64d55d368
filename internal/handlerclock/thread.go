package handlerclock

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCounters are the calling thread's counters that getrusage
// (RUSAGE_THREAD) gives: context switches it did not ask for (the kernel
// preempted it), ones it asked for (it slept), and page faults.
type threadCounters struct {
	involuntary, voluntary, minorFaults, majorFaults int64
}

// readThreadCounters reads the calling thread's counters. An error (none
// is expected on Linux) reads as zeros: the diagnostic never fails the
// handler it watches.
func readThreadCounters() threadCounters {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return threadCounters{}
	}
	return threadCounters{involuntary: ru.Nivcsw, voluntary: ru.Nvcsw, minorFaults: ru.Minflt, majorFaults: ru.Majflt}
}

// threadCPU is the calling thread's CPU time so far (user and system,
// CLOCK_THREAD_CPUTIME_ID, in nanoseconds): it advances only while the
// thread runs on a CPU.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// wallSince is the monotonic time since epoch, in nanoseconds.
func wallSince(epoch time.Time) int64 {
	return int64(time.Since(epoch))
}
