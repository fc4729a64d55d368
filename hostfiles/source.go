package hostfiles

// What an owner of host file changes tells the Reconciler: a Source and
// its Plan of Changes, and the optional interfaces that explain a refusal
// and name the object behind a path. The Reconciler's side is in
// reconciler.go (when passes run) and pass.go (what one pass does).

import (
	"slices"
	"strings"
)

// Change is one host file a Source wants changed.
type Change struct {
	Path string
	// Want computes the content wanted from the file's original content
	// (the journal's record once the file has been changed, else the file
	// as it is). An error is reported like a permanent write error.
	Want func(original string) (string, error)
	// Satisfied tells whether content already meets the want (nil: equal
	// after trimming white space). An IRQ affinity is satisfied by any set
	// that avoids the banned CPUs, so that irqbalance may place the IRQ
	// within it without the plugin writing it back. A file whose original
	// content is satisfied is neither recorded nor written, and a changed
	// one gets its original back.
	Satisfied func(content, want string) bool
	// KernelForm says that the kernel may show an accepted value in a form
	// of its own (acpi-cpufreq resolves a frequency to its table,
	// intel_pstate shows preference 128 as balance_performance): what the
	// file reads right after a successful write of the want also meets
	// that want, for as long as the file reads it; it is not rewritten at
	// every rescan.
	KernelForm bool
	// Order sorts the writes of a pass, ascending, and the restores,
	// descending (then by path): a cgroup's parents take CPUs before it,
	// and give them back after it.
	Order int
	// Gives, when set, tells whether writing want over content gives
	// something back (a cgroup's exclusive CPUs shrink): such writes run
	// right after the restores, in descending Order like them, before
	// every other write.
	Gives func(content, want string) bool
	// Verify, when set, checks the content of a file that meets the want:
	// right after the pass wrote it, and at every later pass. An error is
	// a problem the kernel reports in the file itself (a cgroup partition
	// it found invalid, "isolated invalid (<reason>)"): the file is left as
	// it is, and the problem is logged once, counted as a permanent error
	// and listed in Status.Failures (Failure.Invalid) until the content
	// passes again or the file is no longer wanted.
	Verify func(content string) error
	// Original, when set, is the original to record for a file first seen
	// with content (not yet in the journal): what it held before someone
	// else's change that the file only inherited. A thread forked while
	// housekeeping confined its parent inherits the narrow affinity: its
	// original is taken as that affinity widened again, so that it gets
	// the CPUs back when released. The want is then computed from it.
	Original func(content string) string
	// Resettable says that the kernel may change the file behind the
	// writes of the same pass: a thread's affinity, which the kernel
	// resets to its cgroup's CPUs whenever that cgroup's cpuset changes
	// (a unit's AllowedCPUs=, a top-level cgroup's cpuset.cpus). Its
	// original is recorded even when it meets the want, so that it is
	// given back after such a reset; it is written after every other
	// write of the pass, read again just before (skipped when it meets the
	// want then), and so set again after a reset the pass itself caused.
	// Give it an Order below the changes that reset it, so that it is
	// restored after them too (also by the next process after a kill -9:
	// the journal keeps the Order).
	Resettable bool
	// Wrote, when set, is called with the path right after the pass wrote
	// the want there with success; not when the file met the want
	// already, nor for a restore. It runs on the reconciler's goroutine,
	// before the Plan's After. The IRQ source follows the IRQs it moved
	// this way: the kernel may defer such a move (package irq).
	Wrote func(path string)
}

// Plan is what a Source wants in one pass.
type Plan struct {
	Changes []Change
	// Before runs after the pass recorded new originals and before it
	// writes; After runs after its writes and restores. Both carry state
	// outside files that must follow the files (irqbalance's banned CPUs).
	// An error is transient: the pass is retried.
	Before, After func() error
	// Pending says that some wanted files cannot be planned in this pass:
	// they do not exist yet (a container's cgroup the runtime creates
	// after the reply), or their original can be read only once this pass
	// has written others (power's preference under the performance
	// governor it restores). The pass is repeated with backoff, without an
	// error.
	Pending bool
	// Reread says that what a pass last read of this plan's files may no
	// longer be what they hold, though no one broke a want: others may
	// rewrite them within the want they had (irqbalance places an IRQ on
	// any CPU not banned), and the want is now stricter (a CPU newly
	// banned). Its files are then read, as at a rescan, rather than taken
	// as settled by what a pass last read (the package comment).
	Reread bool
}

// Source is an owner of host file changes.
type Source interface {
	// Owner names the source in the journal, logs and Status ("irq").
	Owner() string
	// Plan lists the files the source wants changed now. It runs on the
	// reconciler's goroutine, off every reply path, and may read files.
	// On error the source's files are left as they are (neither written
	// nor restored) and the pass is retried: those it recorded, and those
	// it Claims.
	Plan() (Plan, error)
}

// Claimer is an optional interface of a Source that may want a file
// whose record names another owner: a file handed over from one Source
// to another (the global unbound workqueue mask, kernelWork.workqueues'
// until a pool has housekeeping, then housekeeping's). The record keeps
// the owner that recorded the original; when the Source that wants the
// file now fails to plan, the file is left as it is rather than restored
// because the recording owner no longer wants it, in the first pass after
// the hand-over as in later ones. A failed plan says nothing about what
// its Source wants, and a restore there would loosen isolation for a
// pass (unbound kernel work back on exclusive CPUs).
type Claimer interface {
	// Claims tells whether the Source plans path whenever it wants it
	// changed. It must not read files: it is asked after Plan failed.
	Claims(path string) bool
}

// HoldBackScoper is an optional interface of a Source whose files wait
// for one another only within parts of them. A restore that fails for now
// holds back the same owner's restores of lower Order until a later pass
// (restore.go): by default all of them, since a later restore may reset
// an earlier one (a thread's affinity, restored before its cgroup's
// restore resets it, would lose its original). A Source whose restores
// depend on one another only within a part of its files (power: a cpufreq
// policy's governor, frequencies and preference, an uncore die's bounds;
// never another CPU's or die's) names each path's part: a restore that
// fails for now then holds back only the restores of its own part. A CPU
// gone offline (cpufreq answers EBUSY for every file of its inactive
// policy) then keeps no other CPU at its class.
type HoldBackScoper interface {
	// HoldBackScope names the part of the Source's files that path
	// belongs to, the same in every pass and process (the journal's
	// records of an earlier one are restored by it too). It must not read
	// files.
	HoldBackScope(path string) string
}

// Rescanner is an optional interface of a Source that keeps, between
// passes, what it reads to plan (the IRQs the node has, the CPUs' power
// files): Rescan is called at the start of every full pass (the periodic
// rescan, Flush), before Plan, so that such a Source reads the node anew
// then. What it keeps must be what only changes with the node itself (a
// driver loaded, a CPU's cpufreq policy), never what its owner wants: a
// want is read at every Plan. It runs on the reconciler's goroutine.
type Rescanner interface {
	Rescan()
}

// Tightener is an optional interface of a Source whose wants may grow
// stricter in a way that leaves a gap until the pass (a CPU banned anew:
// a new exclusive container's CPUs take device IRQs until the pass moves
// them). The pass that takes such a change is spaced by MinInterval
// alone, not by the spacing after a long pass (BusyShare, up to BusyMax):
// while a kicked pass waits for that spacing, the worker asks every
// MinInterval whether a Source tightens, and starts the pass when one
// does. A change that only loosens (a CPU released) keeps the spacing:
// it leaves no isolation gap, only IRQs spread over fewer CPUs a little
// longer, and under a stream of such changes the spacing is what keeps
// the passes within their share of the worker.
type Tightener interface {
	// Tightens tells whether what the owner wants now is stricter than
	// what the last Plan planned. It runs on the reconciler's goroutine
	// under the pass lock, must not read files, and should be cheap.
	Tightens() bool
}

// Explainer is an optional interface of a Source: a hint for the log and
// Status when the kernel refuses one of its files for good.
type Explainer interface {
	Explain(path string, err error) string
}

// Identifier is an optional interface of a Source whose paths may come to
// name another object while a record waits: the kernel frees an IRQ
// number and gives it to another device, whose affinity starts from the
// default. The original of the old object is not the new one's: a record
// whose identity changed is dropped rather than restored, and a file
// still wanted gets the new object's content recorded as its original.
type Identifier interface {
	// Identity names what the file at path belongs to now: names
	// separated by commas (an IRQ shared by several handlers), of which
	// one in common is enough to be the same object; "" when that is
	// unknown, which matches any identity.
	Identity(path string) string
}

// identity is what a Source says the file at path belongs to, "" when it
// does not say.
func identity(src Source, path string) string {
	if id, ok := src.(Identifier); ok {
		return id.Identity(path)
	}
	return ""
}

// reused tells whether the file of a record now belongs to something
// else than when its original was recorded; an unknown identity, then or
// now, is not a change.
func reused(rec Record, now string) bool {
	if rec.Identity == "" || now == "" {
		return false
	}
	names := strings.Split(now, ",")
	for _, n := range strings.Split(rec.Identity, ",") {
		if slices.Contains(names, n) {
			return false
		}
	}
	return true
}
