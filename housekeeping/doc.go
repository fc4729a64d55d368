// Package housekeeping keeps host processes and unbound kernel work off
// the CPUs exclusive containers hold, at run time, without isolcpus: the
// "housekeeping set" is the online CPUs less the CPUs the configured pools
// keep (pools.<pool>.housekeeping), so it shrinks when such a CPU is
// granted and widens when it is released.
//
// It is a hostfiles.Source: every change goes through the journal of
// originals (recorded durably before the first write, restored exactly
// when no longer wanted, also after a kill -9 and by a restart without the
// feature), and it is planned and written in the reconciler's coalesced
// background passes, never on a container's reply path. Values that are
// not files are virtual paths the reconciler's FS serves: systemd's unit
// properties below SystemdRoot (SystemdFS), threads' affinities below
// AffinityRoot (AffinityFS). What it changes:
//
//   - the unbound workqueue mask, /sys/devices/virtual/workqueue/cpumask
//     (a hex mask, as /proc/irq's): its original less the kept CPUs;
//   - on cgroup v2 without systemd, each top-level cgroup other than the
//     pods' tree (kubepods.slice, kubepods, Config.PodCgroups):
//     cpuset.cpus becomes its original (or, when empty, every CPU) less
//     the kept CPUs. Only the top level is written: a child's effective
//     CPUs are within its parent's, and the root's cpuset cannot be
//     written. A root that does not delegate cpuset is skipped and
//     reported: the plugin never enables a controller;
//   - on cgroup v2 under systemd, AllowedCPUs= of every active unit
//     directly in -.slice (system.slice, user.slice, machine.slice,
//     init.scope, a package's ceph.slice...), as runtime properties
//     through systemd's D-Bus API (systemd.go): their cpuset.cpus are
//     systemd's, rewritten at every daemon-reload;
//   - the affinity of every unbound kernel thread that allows it
//     (PF_KTHREAD without PF_NO_SETAFFINITY, allowed on more than one
//     CPU): its original less the kept CPUs, or the set when none is left;
//   - the affinity of every thread outside the pods' tree (any hierarchy's
//     path in /proc/<pid>/cgroup), this process's included: its original
//     less the kept CPUs; left alone when it is allowed on one CPU only or
//     only on kept ones (a process's own choice). On cgroup v1, which has
//     no cpuset systemd manages, that is what confines them; on cgroup v2
//     it keeps the cgroups' cpuset changes, which reset their tasks'
//     affinities, from widening them: recorded before the first change,
//     set again after each, restored after the cgroups (threads.go).
//
// Thread affinities are recorded as AffinityRoot/<tid>/<starttime>: a
// thread id the kernel reuses names another path, so no thread gets
// another's original. A thread forked while its parent was confined
// inherits the narrow affinity: a thread the previous pass did not see
// whose affinity is exactly the set that pass gave the host (on a
// process's first pass, when the journal holds threads an earlier one
// left confined: this pass's set) is recorded with an original of every
// CPU host processes have when nothing is kept (online, not isolcpus), so
// it is widened when released (hostfiles.Change.Original). Never where
// that cannot be told from a choice: a set of one CPU (a thread pinned
// there is its own choice), nothing confined before the pass, or a thread
// that existed when an earlier process last looked (threads.go).
//
// Limits: a process that sets its own affinity after a pass runs there
// until the next pass that reads its thread (a rescan, at most
// hostfiles.Timing.Rescan later: a kicked pass takes a thread it found
// confined as it was), which narrows it from the original it had when
// first confined and restores that one on release, not its later choice;
// on cgroup v1 a thread forked between the last confining pass and the
// release keeps the narrow affinity (on cgroup v2 the release pass widens
// it, unless a kill -9 came first), and on either so does one forked while
// the host set was one CPU; a process that set exactly the host set (of
// several CPUs) itself, after the confinement began, is widened on
// release. The kernel's refusals (EINVAL, EPERM) are counted and
// reported like a file's, and audit says them.
//
// Host processes never get fewer CPUs than the floor (pools.exclusive-non-
// isolcpus.minInfraCPUs), counting only the CPUs of the set they run on
// (not isolcpus): when fewer would be left, kept CPUs that are not
// isolated are given back, idle ones before held ones, and a warning
// names them (Set).
package housekeeping
