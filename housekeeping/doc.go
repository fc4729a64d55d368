// Package housekeeping keeps host processes and unbound kernel work off
// the CPUs exclusive containers hold, at run time, without isolcpus: the
// "housekeeping set" is the online CPUs less the CPUs the configured pools
// keep (pools.<pool>.housekeeping), so it shrinks when such a CPU is
// granted and widens when it is released.
//
// It is a hostfiles.Source: every file goes through the journal of
// originals (recorded durably before the first write, restored exactly
// when no longer wanted, also after a kill -9), and it is planned and
// written in the reconciler's coalesced background passes, never on a
// container's reply path. What it writes:
//
//   - the unbound workqueue mask, /sys/devices/virtual/workqueue/cpumask
//     (a hex mask, as /proc/irq's): its original less the kept CPUs;
//   - on cgroup v2 without systemd, each top-level cgroup other than the
//     pods' tree (kubepods.slice, kubepods): cpuset.cpus becomes its
//     original (or, when empty, every CPU) less the kept CPUs. Only the
//     top level is written: in cgroup v2 a child's effective CPUs are
//     within its parent's, so the whole subtree follows, and the root
//     cgroup's cpuset cannot be written at all.
//
// What it does not do (issue 32): under systemd, the slices are systemd's,
// and a write to their cpuset.cpus is undone at the next daemon-reload:
// they need AllowedCPUs= through systemd's D-Bus API, which this package
// does not have yet, so it skips them and says so once. cgroup v1 is not
// handled either, nor the affinity of unbound kernel threads. It never
// enables a controller: a hierarchy whose root does not delegate cpuset to
// its children is skipped and reported.
//
// The set never has fewer CPUs than the floor (pools.exclusive-non-isolcpus.
// minInfraCPUs): when fewer would be left, kept CPUs are given back, idle
// ones before held ones, and a warning names them.
package housekeeping
