// Package irq keeps device interrupts off CPUs that exclusive containers
// hold, and restores them exactly when the CPUs are released.
//
// The owner (the plugin) says which CPUs are banned, in memory (SetBanned);
// the Source turns that into changes of host files that package hostfiles
// applies in the background, recording each original first:
//
//   - /proc/irq/N/smp_affinity_list of every IRQ whose affinity includes a
//     banned CPU becomes its original affinity minus the banned CPUs;
//   - /proc/irq/default_smp_affinity (a hexadecimal mask: 32-bit groups,
//     most significant first, comma-separated; written back in the
//     kernel's own width) loses the banned CPUs, so IRQs requested later
//     start elsewhere;
//   - IRQs that appear later (a driver loads, a VF is created) are found by
//     the reconciler's periodic rescan, which also undoes another
//     program's writes that put an IRQ back on a banned CPU.
//
// An IRQ already off the banned CPUs is left alone and never recorded: its
// value is not the plugin's to restore.
//
// Empty affinity: when an IRQ's original affinity lies entirely within
// the banned CPUs (it was pinned to the CPU now held), it goes to the
// CPUs of its NUMA node (/proc/irq/N/node) that are not banned, or, when
// there are none or the node is unknown, to every online CPU that is not
// banned: keeping the exclusive CPU quiet is the point, and the IRQ's
// locality is kept where it can be. If every online CPU is banned the IRQ
// is left as it is and reported. default_smp_affinity follows the same
// rule without a node.
//
// A move the kernel defers (x86, while the IRQ's previous move is
// incomplete: it still takes its next interrupt on the banned CPU) is
// counted and logged, not retried: nothing from user space completes it
// (deferred.go).
//
// Kernel-managed IRQs (the write fails with EIO, or EPERM on newer
// kernels), per-CPU IRQs and the timer cannot be moved: the reconciler
// logs them once, counts them and reports them (Status, the audit), and
// does not retry them.
//
// irqbalance: when it runs, it would put IRQs back onto the banned CPUs at
// its next rebalance. Restarting it with IRQBALANCE_BANNED_CPULIST (what
// CRI-O does) causes restart storms that trip systemd's start limit, and
// relying on its skipping of isolcpus/nohz_full CPUs covers neither
// exclusive-non-isolcpus nor CPUs that become exclusive at run time. So
// the Source uses irqbalance's control socket (/run/irqbalance/
// irqbalance<PID>.sock, in every build with the UI, which Debian's has):
// "settings cpus <list>" sets the banned CPUs at run time, without a
// restart. irqbalance replaces what it bans (its own set,
// IRQBALANCE_BANNED_CPUS, IRQBALANCE_BANNED_CPULIST or isolated ∪
// nohz_full, or a list set through its socket earlier) with that list,
// so the Source asks it what it bans ("setup") before it first tells it
// anything, sends that set plus the banned CPUs, and when nothing is
// banned gives that set back: "settings cpus NULL" when it is irqbalance's
// own set (read from its environment and sysfs, as irqbalance computes
// it), which makes irqbalance compute it again, else the list (a ban set
// through the socket before the plugin). An answer it
// cannot read leaves the own set, with a warning. The banned list is journaled like
// an IRQ's affinity (irqbalancefs.go: IrqbalancePath, its original
// recorded before the first command, restored after the IRQs, kept until
// irqbalance took it, also after a kill -9); it is told before any IRQ is
// written, so irqbalance does not undo the writes. A new irqbalance
// process (a restart) is told at the next rescan or grant; its
// predecessor's record is dropped, not told to it.
package irq
