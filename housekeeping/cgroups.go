package housekeeping

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// podTrees are the top-level cgroups of the pods (the kubelet's systemd
// and cgroupfs drivers): the pools pin them, housekeeping leaves them.
var podTrees = []string{"kubepods.slice", "kubepods"}

// ErrNotDone wraps why the top-level cgroups are not confined on this
// node: what this slice of issue 32 does not do yet.
var ErrNotDone = errors.New("not done")

// unified tells whether cgroupRoot is a cgroup v2 (unified) hierarchy.
func unified(cgroupRoot string) bool {
	_, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers"))
	return err == nil
}

// Systemd tells whether systemd manages the cgroup hierarchy: its
// init.scope is at the top (cgroup v2), or PID 1 is systemd. Its slices
// are then its own: a cpuset.cpus written behind its back is undone at the
// next daemon-reload, so they must be changed through its D-Bus API.
func Systemd(cgroupRoot, procRoot string) bool {
	if st, err := os.Stat(filepath.Join(cgroupRoot, "init.scope")); err == nil && st.IsDir() {
		return true
	}
	comm, err := os.ReadFile(filepath.Join(procRoot, "1", "comm"))
	return err == nil && strings.TrimSpace(string(comm)) == "systemd"
}

// cgroupTargets lists the top-level cgroups whose cpuset.cpus housekeeping
// writes where systemd does not manage them (Systemd), and the
// ones it skips with why. An error wrapping ErrNotDone says why none is
// written (cgroup v1, no cpuset delegated).
// pods are further top-level cgroups of the pods, left alone like
// podTrees.
func cgroupTargets(cgroupRoot string, pods []string) (dirs []string, skipped map[string]string, err error) {
	if !unified(cgroupRoot) {
		return nil, nil, fmt.Errorf("%w: %s is not a cgroup v2 (unified) hierarchy; cgroup v1 needs its own way (issue 32)", ErrNotDone, cgroupRoot)
	}
	subtree, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the controllers the root delegates: %w", err)
	}
	if !slices.Contains(strings.Fields(string(subtree)), "cpuset") {
		return nil, nil, fmt.Errorf("%w: the root cgroup does not delegate the cpuset controller (%s/cgroup.subtree_control), and the plugin never enables controllers", ErrNotDone, cgroupRoot)
	}
	entries, err := os.ReadDir(cgroupRoot)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the top-level cgroups: %w", err)
	}
	skipped = map[string]string{}
	for _, e := range entries {
		if !e.IsDir() || slices.Contains(podTrees, e.Name()) || slices.Contains(pods, e.Name()) {
			continue
		}
		dir := filepath.Join(cgroupRoot, e.Name())
		if holdsPodTree(dir) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "cpuset.cpus")); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("cgroup %s: %w", dir, err)
			}
			skipped[dir] = "it has no cpuset.cpus (a threaded cgroup?)"
			continue
		}
		if part, err := os.ReadFile(filepath.Join(dir, "cpuset.cpus.partition")); err == nil && strings.TrimSpace(string(part)) != "member" {
			skipped[dir] = fmt.Sprintf("it is a cpuset partition (%s), whose CPUs someone chose", strings.TrimSpace(string(part)))
			continue
		}
		dirs = append(dirs, dir)
	}
	return dirs, skipped, nil
}

// holdsPodTree tells whether the top-level cgroup dir has the pods' tree
// below it: a kubelet's --cgroup-root puts it there, and makes it at its
// start, before any pod. With the cgroupfs driver it is kubepods (or
// kubepods.slice) right below; with the systemd driver, whose slice names
// repeat their parents', --cgroup-root=/custom.slice gives
// custom.slice/custom-kubepods.slice, and --cgroup-root=/custom-nodes.slice
// custom.slice/custom-nodes.slice/custom-nodes-kubepods.slice (holdsPodSlice).
// Known from the directory alone, it is left alone before the first pod's
// sandbox names it (Config.PodCgroups) and after the last one's is gone:
// confining it would confine the exclusive containers below it to the
// host's CPUs.
func holdsPodTree(dir string) bool {
	for _, tree := range podTrees {
		if isDir(filepath.Join(dir, tree)) {
			return true
		}
	}
	stem, ok := strings.CutSuffix(filepath.Base(dir), ".slice")
	return ok && holdsPodSlice(dir, stem, maxRootSlices)
}

// maxRootSlices bounds how many slices deep a systemd --cgroup-root is
// looked for below a top-level slice: a few, as kubelets are configured;
// the walk visits only slices named after their parent.
const maxRootSlices = 4

// holdsPodSlice tells whether the slice dir, named stem.slice, has the
// pods' slice (stem-kubepods.slice) below it, directly or in a child
// slice systemd named after it (stem-<name>.slice), at most depth slices
// down.
func holdsPodSlice(dir, stem string, depth int) bool {
	if isDir(filepath.Join(dir, stem+"-kubepods.slice")) {
		return true
	}
	if depth == 0 {
		return false
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		child, ok := strings.CutSuffix(e.Name(), ".slice")
		if ok && e.IsDir() && strings.HasPrefix(child, stem+"-") && holdsPodSlice(filepath.Join(dir, e.Name()), child, depth-1) {
			return true
		}
	}
	return false
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// cgroupChange narrows a top-level cgroup's cpuset.cpus: its original
// less what set leaves out, or set itself when the original is empty (in
// cgroup v2 an empty cpuset.cpus means every CPU of the parent). An
// original with no CPU of the set (the cgroup was pinned to CPUs now
// kept) is refused, not emptied: empty would mean every CPU. An empty
// original the kernel will not take back while the cgroup has tasks stays
// in the journal meanwhile (restoreEmptyCPUs), so the want is computed
// from it again, not from the list the cgroup holds then.
func cgroupChange(dir string, set cpuset.CPUSet) hostfiles.Change {
	ch := narrowChange("cgroup "+dir+": cpuset.cpus", set)
	ch.Path = filepath.Join(dir, "cpuset.cpus")
	return ch
}

// narrowChange is the Want and Satisfied of a CPU list where empty means
// every CPU of the parent (a cgroup v2 cpuset.cpus, a unit's
// AllowedCPUs): the original less what set leaves out, or set itself for
// an empty original; refused when no CPU of the set is left. what names
// the list in errors.
func narrowChange(what string, set cpuset.CPUSet) hostfiles.Change {
	return hostfiles.Change{
		Want: func(original string) (string, error) {
			if strings.TrimSpace(original) == "" {
				return set.String(), nil
			}
			orig, err := cpulist.Parse(original)
			if err != nil {
				return "", fmt.Errorf("%s: %w", what, err)
			}
			want := orig.Intersection(set)
			if want.IsEmpty() {
				return "", fmt.Errorf("%s is pinned to CPUs %s, none of the housekeeping set %s: left as it is", what, orig, set)
			}
			return want.String(), nil
		},
		Satisfied: func(content, want string) bool {
			have, err1 := cpulist.Parse(content)
			wanted, err2 := cpulist.Parse(want)
			return err1 == nil && err2 == nil && cpulist.Equal(have, wanted)
		}}
}
