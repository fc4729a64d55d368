package housekeeping

// An empty cpuset.cpus (cgroup v2) means every CPU of the parent. The
// kernel refuses to write one over a non-empty list while the cgroup has
// tasks (ENOSPC, cpuset.c validate_change), and nothing else brings the
// empty list back short of the cgroup losing its tasks (turning the
// controller off at the root would take it from the pods too). So where
// the kernel refuses, the cgroup gets its parent's CPUs themselves: the
// CPUs an empty list gives it now (cpuset.cpus.effective, which leaves
// out the CPUs of the parent's partitions: a list naming those would be
// refused, EINVAL, beside a partition root). For a top-level cgroup the
// plugin confined, the journal keeps the empty original meanwhile
// (hostfiles.ErrNearest): no list says by itself that it stands for the
// empty one, as the root's CPUs move (a CPU offline, a partition made).

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// effectiveFile is a cgroup's CPUs as the kernel applies them: what an
// empty cpuset.cpus of a child inherits.
const effectiveFile = "cpuset.cpus.effective"

// emptyCPUs empties the cpuset.cpus file, or, where the kernel refuses
// that for a cgroup with tasks (ENOSPC), writes the CPUs its parent has,
// which the empty list would have given it, and returns them (widened).
// Any other error is the write's.
func emptyCPUs(fsys hostfiles.FS, file string) (widened string, err error) {
	err = fsys.WriteFile(file, []byte("\n"))
	if !errors.Is(err, syscall.ENOSPC) {
		return "", err
	}
	parent := filepath.Join(filepath.Dir(filepath.Dir(file)), effectiveFile)
	data, rerr := fsys.ReadFile(parent)
	if rerr != nil {
		return "", fmt.Errorf("%w; reading the CPUs it would inherit instead: %v", err, rerr)
	}
	cpus := strings.TrimSpace(string(data))
	if cpus == "" {
		return "", fmt.Errorf("%w; its parent has no CPUs (%s) to give it instead", err, parent)
	}
	if werr := fsys.WriteFile(file, []byte(cpus+"\n")); werr != nil {
		return "", fmt.Errorf("the kernel refuses to empty %s while it has tasks (%v); writing its parent's CPUs %s instead: %w", file, err, cpus, werr)
	}
	return cpus, nil
}

// topLevelEmptyCPUs tells whether writing data to p empties the
// cpuset.cpus of a top-level cgroup below cgroupRoot: what housekeeping
// restores there (cgroupChange) when its original was empty.
func topLevelEmptyCPUs(cgroupRoot, p string, data []byte) bool {
	return cgroupRoot != "" && strings.TrimSpace(string(data)) == "" && filepath.Base(p) == "cpuset.cpus" &&
		filepath.Dir(filepath.Dir(filepath.Clean(p))) == filepath.Clean(cgroupRoot)
}

// restoreEmptyCPUs puts back the empty cpuset.cpus original of a
// top-level cgroup. Where the kernel refuses it (the cgroup has tasks),
// the cgroup gets the root's CPUs and the error wraps
// hostfiles.ErrNearest: the journal keeps the empty original, so that
// the next confinement records it again and a restore once the cgroup
// has no tasks writes it exactly (the root's CPUs of the moment are no
// sign of it: a CPU offline or in a partition then, back later).
func restoreEmptyCPUs(fsys hostfiles.FS, file string) error {
	widened, err := emptyCPUs(fsys, file)
	if err != nil || widened == "" {
		return err
	}
	return fmt.Errorf("%s has tasks, which an empty cpuset.cpus may not leave without CPUs (ENOSPC): it holds the root's CPUs %s, which the empty list gives it: %w", file, widened, hostfiles.ErrNearest)
}
