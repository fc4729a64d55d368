// Package handlerclock tells, for each call of a handler and each of its
// phases, how long the phase took by the wall clock and how much of that
// its OS thread spent on a CPU (the thread's CPU clock), plus the thread's
// context switches and page faults over the call (issue 45).
//
// Why: in the daemon, CreateContainer's mean is several times what the
// same decision takes in a warm loop, and an execution trace shows its
// goroutine neither runnable-waiting, blocked nor in a system call. What
// is left lies under Go: either the thread is off its CPU (the kernel ran
// something else: wall well above the thread's CPU, with involuntary
// switches), or the code itself runs slower than in the warm loop (cold
// caches, page faults, GC assists: the thread's CPU itself is high). A
// phase's wall clock against its CPU clock tells these apart.
//
// It is a diagnostic, off unless the daemon is started with
// --handler-clocks: a nil *Recorder records nothing, and each of its
// calls on the handler's path is then one comparison. On, a call costs a
// few system calls (clock_gettime per phase; getrusage and gettid at
// entry and exit) and no allocation; the summaries are computed when
// asked for, off the path.
package handlerclock
