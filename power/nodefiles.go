package power

// What a pass reads to plan that describes the node's drivers, not what
// the plugin or anyone sets: whether a CPU has PM QoS, its idle states'
// names, its cpufreq policy and that policy's CPUs, governors and
// preferences on offer, hardware frequency limits, the uncore dies.
// These change only when a driver is loaded or unloaded, or a CPU goes
// on or off line (which makes the plugin a new Source), so the Source
// keeps them between passes and reads them anew at each rescan
// (hostfiles.Rescanner): a pass kicked by a container's creation then
// reads only what a class's change needs (issue 45: every pass read
// every CPU's cpufreq and cpuidle directories, a tenth of the daemon's
// CPU with 1,000 containers running). What can change under the plugin's
// own writes (the governor a preference depends on) is always read.

import (
	"os"
	"path/filepath"
)

// nodeFiles keeps what the planner read of the node's driver files, by
// path. A nil *nodeFiles reads every time (Node.Check at start). Only the
// reconciler's goroutine uses it (Plan, Rescan).
type nodeFiles struct {
	texts  map[string]textRead
	exists map[string]bool
	links  map[string]linkRead
	dirs   map[string]dirRead
}

type textRead struct {
	text string
	ok   bool
}

type linkRead struct {
	target string
	err    error
}

type dirRead struct {
	names []string
	err   error
}

func newNodeFiles() *nodeFiles {
	return &nodeFiles{texts: map[string]textRead{}, exists: map[string]bool{}, links: map[string]linkRead{}, dirs: map[string]dirRead{}}
}

// readText is readText, kept.
func (f *nodeFiles) readText(path string) (string, bool) {
	if f == nil {
		return readText(path)
	}
	r, seen := f.texts[path]
	if !seen {
		r.text, r.ok = readText(path)
		// A file that exists and could not be read (EBUSY while a driver
		// changes) is read again by the next pass, not kept as unreadable
		// until the rescan; an absent one is kept as absent.
		if r.ok || !exists(path) {
			f.texts[path] = r
		}
	}
	return r.text, r.ok
}

// readKHz is readKHz, kept.
func (f *nodeFiles) readKHz(path string) (int64, bool) {
	if f == nil {
		return readKHz(path)
	}
	s, ok := f.readText(path)
	return parseKHz(s, ok)
}

// exist is exists, kept.
func (f *nodeFiles) exist(path string) bool {
	if f == nil {
		return exists(path)
	}
	e, seen := f.exists[path]
	if !seen {
		e = exists(path)
		f.exists[path] = e
	}
	return e
}

// evalSymlinks is filepath.EvalSymlinks, kept.
func (f *nodeFiles) evalSymlinks(path string) (string, error) {
	if f == nil {
		return filepath.EvalSymlinks(path)
	}
	l, seen := f.links[path]
	if !seen {
		l.target, l.err = filepath.EvalSymlinks(path)
		f.links[path] = l
	}
	return l.target, l.err
}

// readDirNames is the names in a directory, kept.
func (f *nodeFiles) readDirNames(dir string) ([]string, error) {
	read := func() ([]string, error) {
		entries, err := os.ReadDir(dir)
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names, err
	}
	if f == nil {
		return read()
	}
	d, seen := f.dirs[dir]
	if !seen {
		d.names, d.err = read()
		f.dirs[dir] = d
	}
	return d.names, d.err
}
