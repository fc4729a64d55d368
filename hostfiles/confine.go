package hostfiles

// Which journal records a process may restore: those under the roots it
// is given (RestoreOnlyUnder) or accepted by a rule (RestoreAlsoWhere). The
// journal is a file, and a damaged or forged one must not make the plugin
// write any other host file.

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// ErrOutsideRoots is why a journal record is not restored: its file is
// outside the roots given to RestoreOnlyUnder.
var ErrOutsideRoots = errors.New("outside the host files this process may restore")

// RestoreOnlyUnder confines the restores of journal records to files
// under roots (the plugin's: /proc/irq, /sys/devices/system/cpu and the
// cgroup root, under its configured procRoot, sysfsRoot and cgroupRoot).
// The journal is a file, and a damaged or forged one must not make the
// plugin write any other host file: a record of a file outside them,
// lexically or once symlinks are resolved (/sys/devices/system/cpu/cpu0/
// node0 leads to /sys/devices/system/node), is not written; it is logged
// once, reported in Status as an untrusted Failure, and kept in the
// journal, where a process with other roots may still restore it.
// Without roots, every record may be restored (tests of one Source).
// Call it before Start and Flush.
func (r *Reconciler) RestoreOnlyUnder(roots ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roots, r.realRoots = []string{}, []string{}
	for _, root := range roots {
		root = filepath.Clean(root)
		r.roots = append(r.roots, root)
		if real, err := filepath.EvalSymlinks(root); err == nil {
			root = real
		}
		r.realRoots = append(r.realRoots, root)
	}
}

// confined checks a journal record's path against the roots: an error
// wrapping ErrOutsideRoots when it is outside, another error when its
// symlinks could not be resolved (transient).
func (r *Reconciler) confined(path string) error {
	if r.roots == nil {
		return nil
	}
	clean := filepath.Clean(path)
	if !under(clean, r.roots) && !r.admitted(clean) {
		return fmt.Errorf("%w (%s)", ErrOutsideRoots, strings.Join(r.roots, ", "))
	}
	real, err := filepath.EvalSymlinks(clean)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // the write finds it gone (it never creates a file)
	case err != nil:
		return fmt.Errorf("resolving the symlinks of %s: %w", clean, err)
	case !under(real, r.realRoots) && !r.admitted(real):
		return fmt.Errorf("%w: it leads to %s (%s)", ErrOutsideRoots, real, strings.Join(r.roots, ", "))
	}
	return nil
}

// under tells whether path is one of roots or below one.
func under(path string, roots []string) bool {
	for _, root := range roots {
		if rel, err := filepath.Rel(root, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	return false
}

// RestoreAlsoWhere admits, besides the roots of RestoreOnlyUnder, the
// journal records of files a rule accepts: files with a fixed shape but no
// common directory to confine them to (a network device's rps_cpus lies
// under its device's directory, anywhere below /sys/devices, and a root
// that wide would let a forged journal write any device file). A rule gets
// a clean path, lexically and once its symlinks are resolved, and must
// accept both for the record to be restored. It has no effect without
// RestoreOnlyUnder (nothing is confined then). Call it before Start and
// Flush.
func (r *Reconciler) RestoreAlsoWhere(rules ...func(path string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = append(r.rules, rules...)
}

// admitted tells whether a rule of RestoreAlsoWhere accepts path.
func (r *Reconciler) admitted(path string) bool {
	for _, rule := range r.rules {
		if rule(path) {
			return true
		}
	}
	return false
}
