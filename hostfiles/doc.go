// Package hostfiles changes host files that the kernel owns (/proc/irq,
// /sys/devices/system/cpu, ...) so that every change can be put back
// exactly, also after the plugin is killed at any point.
//
// Two parts:
//
//   - The Journal keeps the ORIGINAL content of every host file the plugin
//     has changed and not yet put back, in one small file next to the state
//     file (host-originals.json). A pass records an original durably
//     (written to a temporary file, fsynced, renamed, directory fsynced)
//     BEFORE it first changes that host file, and drops the record only
//     AFTER the original is back. So whatever instant the process dies at,
//     each changed file has its original on disk: the next process reads
//     the journal and restores what is no longer wanted. The journal names
//     the boot it belongs to (/proc/sys/kernel/random/boot_id): after a
//     reboot the kernel has reset these files itself, and a record of the
//     previous boot would put back a stale value, so such records are
//     discarded.
//
//   - The Reconciler applies a desired state in the background. Owners
//     (Sources, such as package irq's) keep what they want in memory and
//     call Kick, which never blocks and does no I/O, so it can be called
//     under the plugin's lock on a reply path. One goroutine then makes
//     passes: each asks every Source for its Plan (the files it wants
//     changed, and how, given each file's original content), records the
//     new originals, writes what is not yet as wanted, and restores the
//     files whose owner no longer wants them. Kicks coalesce: a pass starts
//     Delay after the first kick and at least MinInterval after the
//     previous pass (and, after a long pass, at least its length divided
//     by BusyShare, so that kicked passes take at most that share of the
//     worker's time under a stream of changes; a pass's length counts
//     what it waited for, so a kicked pass spaced so waits at most
//     BusyMax, or for the next Rescan, which takes it; a change that a
//     Tightener says makes a want stricter, a CPU banned anew, waits
//     only for MinInterval: the worker asks every MinInterval during
//     such a wait), and takes every change made
//     before it asked the Sources, so a burst of a hundred pods is one
//     pass. A Kick wakes the worker only if no pass is due that has yet
//     to ask the Sources: the flag that says so is cleared as such a pass
//     starts, before it plans, so a change kicked later gets a pass of
//     its own, and a stream of creations costs one wake per pass, not
//     one per creation (issue 45). Passes also run every Rescan, which neither kicks nor that
//     spacing put off, to find files that appeared later (an IRQ of a
//     driver loaded after the pod started) and to undo drift (another
//     program writing the file back).
//
// A pass does work in proportion to what changed. The Reconciler keeps
// what each wanted file held when a pass last read or wrote it; a kicked
// pass (or a retry) works each want out again from the same original and
// takes a file whose known content still meets it, or that the kernel
// refused for good with the same want, as settled, without reading it or
// asking its identity. Every other file (a want the known content misses,
// an original to record, a record to restore) goes the full way: read,
// identity checked, recorded, written. Some files are always read:
// those with Verify (the kernel may find a partition invalid at any
// time), the Resettable ones (any cgroup write may reset them), and those
// in a directory the previous pass wrote or restored in (a cpufreq
// policy's governor resets its preference), and those of a Plan with
// Reread (files others rewrite within their want, as irqbalance moves
// an IRQ among the CPUs not banned, whose want just got stricter: what
// was read of them before says nothing of the CPU newly banned); what
// is known of a file no
// Source wanted in a pass, or whose read failed, is forgotten. The
// Rescan passes, and Flush, are full passes: they read every wanted file,
// so drift behind the plugin's back is corrected within a Rescan, as
// before, and they tell the Sources that keep what they read to plan
// (Rescanner: the IRQs the node has) to read it anew. On a node at rest
// a kicked pass thus reads only the files its change touches (issue 45:
// each creation read 512 IRQs' affinities, the housekeeping cgroups and
// the power files, 3 to 4.5 ms of CPU per creation with every isolation
// feature on).
//
// Errors are sorted by errno. A file that vanished (ENOENT: an IRQ freed
// when its driver unloaded) has nothing to restore; its record is dropped.
// Permanent refusals (EIO and EPERM from kernel-managed IRQs, EINVAL for a
// value the kernel rejects, EROFS under a read-only /proc) are logged once,
// counted once and reported by Status, and not retried while the wanted
// value stays the same; except EINVAL, which for some files depends on
// other files (a sibling cgroup's exclusive CPUs) and so is tried again at
// the Rescan passes (writes and restores alike), still logged and counted
// once. Anything else (ENOSPC when a vector space is full, EBUSY,
// a failed journal write) is transient: the pass is retried with backoff.
// Only the failed work backs off: a Kick during the backoff still gets its
// pass at the normal pace (Delay, MinInterval), which tries the failed
// work again too; if that fails, the backoff goes on from where it was.
// A restore may leave the nearest value the kernel takes for now
// (ErrNearest: a populated cgroup's empty cpuset.cpus holds its parent's
// CPUs): its record stays, it is no failure, and it is tried again at
// each full pass.
// Some writes the kernel accepts and then reports a problem in the file
// itself (a cgroup partition it found invalid reads "isolated invalid
// (<reason>)"): a Change with Verify has the file read back after its
// write and at every later pass, and such a problem is logged once,
// counted and reported by Status like a refusal, for as long as it lasts.
//
// A Source owns its records (the journal keeps the owner's name): when a
// Source fails to plan, the files it changed are left as they are rather
// than restored, since the failure says nothing about what it wants; so
// are the files it Claims whose record names another owner (a file
// handed over between Sources: the global workqueue mask). The
// records of an owner no Source claims (the journal of another version)
// are restored, as nothing here wants them, with a warning naming the
// owner. The journal is a file a damaged disk or a hostile hand can
// change, and the owner's name is as easy to forge as the path: what
// bounds the restores is the roots given to RestoreOnlyUnder, and the
// rules given to RestoreAlsoWhere for files of a fixed shape with no
// narrow root (a network device's rps_cpus). A record of a file outside
// them, lexically or through a symlink, is never written; it is logged
// once, reported as an untrusted Failure and kept.
//
// Within a pass, restores come before writes, so that what a released
// owner held (CPUs of a cgroup partition) is free before a new want claims
// it; the journal's drops and new records are then committed in one
// durable write. Writes run in ascending Change.Order, restores in
// descending Order (a cgroup's parents take CPUs before it and give them
// back after it), then by path; writes that give something back
// (Change.Gives: a parent's exclusive CPUs shrink) run first, in
// descending Order like the restores. A restore that fails for now holds
// back the same owner's restores of lower Order until a later pass (only
// those of its own part of the owner's files, for a HoldBackScoper:
// power's are a cpufreq policy's or an uncore die's). Files
// the pass's own writes may reset (Change.Resettable: a thread's affinity,
// which its cgroup's cpuset change resets) are written last, read again
// first. Files whose allowed values depend on each
// other in ways no order fixes (a frequency minimum and maximum) can fail
// transiently once and succeed on the retry, after the other has moved.
package hostfiles
