package housekeeping

// An empty cpuset.cpus (cgroup v2) means every CPU of the parent. The
// kernel refuses to write one over a non-empty list while the cgroup has
// tasks (ENOSPC, cpuset.c validate_change), and nothing else brings the
// empty list back short of the cgroup losing its tasks (turning the
// controller off at the root would take it from the pods too). So where
// the kernel refuses, the cgroup gets its parent's CPUs themselves: the
// CPUs an empty list gives it now. The difference (it no longer follows
// its parent's later changes) is in docs/limitations.md.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// effectiveFile is a cgroup's CPUs as the kernel applies them: what an
// empty cpuset.cpus of a child inherits.
const effectiveFile = "cpuset.cpus.effective"

// emptyCPUs empties the cpuset.cpus file, or, where the kernel refuses
// that for a cgroup with tasks (ENOSPC), writes the CPUs its parent has,
// which the empty list would have given it. Any other error is the
// write's.
func emptyCPUs(fsys hostfiles.FS, file string) error {
	err := fsys.WriteFile(file, []byte("\n"))
	if !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	parent := filepath.Join(filepath.Dir(filepath.Dir(file)), effectiveFile)
	data, rerr := fsys.ReadFile(parent)
	if rerr != nil {
		return fmt.Errorf("%w; reading the CPUs it would inherit instead: %v", err, rerr)
	}
	cpus := strings.TrimSpace(string(data))
	if cpus == "" {
		return fmt.Errorf("%w; its parent has no CPUs (%s) to give it instead", err, parent)
	}
	if werr := fsys.WriteFile(file, []byte(cpus+"\n")); werr != nil {
		return fmt.Errorf("the kernel refuses to empty %s while it has tasks (%v); writing its parent's CPUs %s instead: %w", file, err, cpus, werr)
	}
	return nil
}

// topLevelEmptyCPUs tells whether writing data to p empties the
// cpuset.cpus of a top-level cgroup below cgroupRoot: what housekeeping
// restores there (cgroupChange) when its original was empty.
func topLevelEmptyCPUs(cgroupRoot, p string, data []byte) bool {
	return cgroupRoot != "" && strings.TrimSpace(string(data)) == "" && filepath.Base(p) == "cpuset.cpus" &&
		filepath.Dir(filepath.Dir(filepath.Clean(p))) == filepath.Clean(cgroupRoot)
}

// inheritedOriginal is the Change.Original of a top-level cgroup's
// cpuset.cpus: a list of exactly every CPU of its parent (parent) is
// taken as the empty one. That is what emptyCPUs leaves where the kernel
// refused an empty original, and it gives the cgroup the same CPUs as
// the empty list; recorded as it reads, the next confinement would make
// that widened list the original, and never give the cgroup the empty
// list back once it could take it (no tasks any more).
func inheritedOriginal(parent cpuset.CPUSet) func(content string) string {
	return func(content string) string {
		if parent.IsEmpty() {
			return content
		}
		if have, err := cpulist.Parse(strings.TrimSpace(content)); err == nil && have.Equals(parent) {
			return ""
		}
		return content
	}
}

// rootCPUs are the CPUs of the root cgroup, which a top-level cgroup with
// an empty cpuset.cpus has; empty when they cannot be read (no list is
// then taken as the empty one).
func rootCPUs(cgroupRoot string) cpuset.CPUSet {
	data, err := os.ReadFile(filepath.Join(cgroupRoot, effectiveFile))
	if err != nil {
		return cpuset.New()
	}
	cpus, err := cpulist.Parse(string(data))
	if err != nil {
		return cpuset.New()
	}
	return cpus
}

// Widened tells whether a cpuset.cpus restored to an empty original
// reads a list: the parent's CPUs emptyCPUs wrote where the kernel
// refused the empty one (restore-host's outcome "widened").
func Widened(path, original, content string) bool {
	return filepath.Base(path) == "cpuset.cpus" && strings.TrimSpace(original) == "" && strings.TrimSpace(content) != ""
}
