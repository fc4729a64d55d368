package housekeeping

// Confinement by thread affinity (issue 32), through AffinityFS:
//
//   - every unbound kernel thread that allows it (PF_KTHREAD, without
//     PF_NO_SETAFFINITY, allowed on more than one CPU), on any hierarchy:
//     its cgroup is the root's, which no cpuset narrows;
//   - on cgroup v1 (legacy or hybrid: no cpuset in cgroup v2), every
//     user-space thread outside the pods' tree, this process's too (a
//     host process like any other: left alone, its threads would run on
//     the held CPUs, as the audit showed in the VM): systemd
//     does not manage the v1 cpuset hierarchy, and a cpuset cgroup of our
//     own would move processes between cgroups that systemd and the
//     runtimes believe they own. TuneD's cpu-partitioning and tuna set the
//     threads' affinity instead; so does this.
//   - on cgroup v2, the same user-space threads, although the top-level
//     cgroups or units confine them: the kernel resets the affinity of a
//     cgroup's tasks to its CPUs whenever its cpuset changes (ours, and
//     the root's cpuset controller that a unit's AllowedCPUs= enables, for
//     every other top-level cgroup), so a process that had inherited
//     PID 1's affinity without the isolcpus= CPUs, or chose its own, would
//     end on every CPU (issue 41, items 11 and 12). Each is recorded before
//     the first cpuset change (Change.Resettable: also when it meets the
//     want), set again after the cpuset writes of the pass, and restored
//     after the cgroups are (affinityOrder), also by the next process
//     after a kill -9. The release pass (release) gives them their
//     originals back right after the cgroups', so that a thread forked
//     since the last pass is widened from what it inherited, not left on
//     every CPU.
//
// The scan reads /proc/<pid>/stat of each process and, on v1, its cgroup
// file and each thread's stat, and the reconciler one affinity per
// planned thread: linear in the threads, and the journal is written once
// per pass whatever their number (Journal.Commit).

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/internal/procfs"
)

// affinityOrder is the Order of the host's user-space threads on cgroup
// v2: below the cgroups' and units' (0), whose cpuset changes reset them,
// so that they are restored after those.
const affinityOrder = -1

// threads are the affinity changes of one pass, and how many threads of
// each kind were planned (for the log and tests).
type threads struct {
	changes       []hostfiles.Change
	kernel, users int
}

// threadChanges lists the threads whose affinity housekeeping narrows to
// host: the unbound kernel threads, and when users is set (cgroup v1) the
// host's user-space threads outside the top-level cgroups pods.
//
// A thread forked while its parent was confined inherits the narrow
// affinity, and left so it would keep it after the release. So a thread
// that the previous pass did not see (forked since), started after
// lookedAfter, and whose affinity is exactly inherited, the set the
// previous pass gave host processes, is taken as having inherited it: its
// original is recorded as that affinity with base (every CPU host
// processes have when nothing is kept) added back, so that it is widened
// when released. A thread seen before keeps what it has as its original.
//
// The guess never applies where inheriting cannot be told from a choice:
//   - inherited is empty when nothing was confined before this pass (the
//     previous pass kept nothing, or this process's first pass found no
//     thread an earlier one left confined): no thread can have inherited;
//   - a set of one CPU: a thread allowed on that CPU alone (an
//     administrator's taskset -c 0) is its own choice, and never widened,
//     even if it was forked while confined;
//   - a thread started at or before lookedAfter (the latest start time
//     of a thread an earlier process recorded): that process planned it
//     and, not recording it, took its affinity as its own.
//
// resets says that the cgroups' cpusets are changed (cgroup v2): the
// user-space threads' changes are Resettable, below them. release says
// that this pass restores them: each user-space thread is planned at its
// original (recorded, or the one it gets now), written after the
// cgroups' restores; the kernel threads are left to the journal.
func (s *Source) threadChanges(host, inherited cpuset.CPUSet, lookedAfter uint64, base cpuset.CPUSet, users, resets, release bool, pods []string) (threads, error) {
	entries, err := os.ReadDir(s.cfg.ProcRoot)
	if err != nil {
		return threads{}, fmt.Errorf("listing processes: %w", err)
	}
	seen, next := s.seen, make(map[string]bool, len(s.seen))
	defer func() { s.seen = next }()
	original := func(p string, start uint64) func(string) string {
		next[p] = true
		if seen[p] || inherited.Size() <= 1 || start <= lookedAfter {
			return nil
		}
		return func(content string) string {
			have, err := cpulist.Parse(content)
			if err != nil || have.Equals(base) || !have.Equals(inherited) {
				return content
			}
			return have.Union(base).String()
		}
	}
	var out threads
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		pdir := filepath.Join(s.cfg.ProcRoot, e.Name())
		st, err := procfs.ReadStat(filepath.Join(pdir, "stat"))
		if err != nil {
			continue // gone since listed, or not a process
		}
		if st.Kernel() {
			if st.Pinned() || release {
				continue // per-CPU, or a workqueue worker: the kernel's
			}
			// A kernel thread is one thread: its pid is its tid.
			p := AffinityPath(pid, st.Start)
			out.changes = append(out.changes, affinityChange(p, host, true, original(p, st.Start)))
			out.kernel++
			continue
		}
		if !users {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join(pdir, "cgroup"))
		if err != nil || inPods(string(cgroup), pods) {
			continue
		}
		tasks, err := os.ReadDir(filepath.Join(pdir, "task"))
		if err != nil {
			continue
		}
		for _, te := range tasks {
			tid, err := strconv.Atoi(te.Name())
			if err != nil {
				continue
			}
			tst, err := procfs.ReadStat(filepath.Join(pdir, "task", te.Name(), "stat"))
			if err != nil || tst.Pinned() {
				continue
			}
			p := AffinityPath(tid, tst.Start)
			ch := affinityChange(p, host, false, original(p, tst.Start))
			if release {
				ch = releaseChange(p, original(p, tst.Start))
			}
			if resets {
				ch.Order, ch.Resettable = affinityOrder, true
			}
			out.changes = append(out.changes, ch)
			out.users++
		}
	}
	return out, nil
}

// inPods tells whether a process's cgroups (/proc/<pid>/cgroup, one line
// per hierarchy on cgroup v1) put it in the pods' tree: the first
// component of its path in ANY hierarchy is kubepods.slice, kubepods or
// one of pods. Any, not only the cpuset hierarchy's: never confine a
// container's process, which the pools pin.
func inPods(cgroup string, pods []string) bool {
	for _, path := range procfs.CgroupPaths(cgroup) {
		top, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		if top != "" && (slices.Contains(podTrees, top) || slices.Contains(pods, top)) {
			return true
		}
	}
	return false
}

// affinityChange narrows a thread's affinity to its original's CPUs in
// host. A thread allowed on one CPU only (a per-CPU kernel thread, a
// process pinned there) is left as it is. An original with no CPU of host
// is a kernel thread's: it gets host; or a process's own choice of kept
// CPUs: left as it is, since a process that pins itself means it.
// original, when set, maps the affinity of a thread not yet recorded to
// the original recorded (Change.Original).
func affinityChange(p string, host cpuset.CPUSet, kernel bool, original func(string) string) hostfiles.Change {
	return hostfiles.Change{Path: p,
		Want: func(original string) (string, error) {
			orig, err := cpulist.Parse(original)
			if err != nil {
				return "", fmt.Errorf("thread affinity %s: %w", p, err)
			}
			if orig.Size() <= 1 {
				return original, nil
			}
			want := orig.Intersection(host)
			switch {
			case !want.IsEmpty():
				return want.String(), nil
			case kernel:
				return host.String(), nil
			}
			return original, nil
		},
		Satisfied: func(content, want string) bool {
			have, err1 := cpulist.Parse(content)
			wanted, err2 := cpulist.Parse(want)
			return err1 == nil && err2 == nil && have.Equals(wanted)
		},
		Original: original,
	}
}

// releaseChange wants a thread's original affinity back: on cgroup v2,
// the pass that restores the cgroups (which resets their tasks to every
// CPU) writes it after them, and records it first for a thread not
// recorded yet (forked since the last pass: original widens what it
// inherited).
func releaseChange(p string, original func(string) string) hostfiles.Change {
	return hostfiles.Change{Path: p,
		Want: func(original string) (string, error) { return original, nil },
		Satisfied: func(content, want string) bool {
			have, err1 := cpulist.Parse(content)
			wanted, err2 := cpulist.Parse(want)
			return err1 == nil && err2 == nil && have.Equals(wanted)
		},
		Original: original,
	}
}
