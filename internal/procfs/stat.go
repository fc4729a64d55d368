// Package procfs parses the few /proc files that both housekeeping (which
// narrows threads' affinity) and the audit (which judges them) read, so
// that the two agree on what a kernel thread is and which threads userland
// may move.
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Task flags of /proc/<pid>/stat (include/linux/sched.h).
const (
	// PFKthread marks a kernel thread.
	PFKthread = 0x00200000
	// PFNoSetAffinity: userland may not change the thread's affinity
	// (per-CPU threads, workqueue workers, which follow the workqueue
	// mask).
	PFNoSetAffinity = 0x04000000
)

// Stat is what is read of /proc/<pid>/stat (or .../task/<tid>/stat).
type Stat struct {
	Flags uint64
	// Start is the start time in clock ticks after boot: with the id, it
	// names one thread, whose id may be reused after it exits.
	Start uint64
}

// Kernel tells whether the task is a kernel thread.
func (s Stat) Kernel() bool { return s.Flags&PFKthread != 0 }

// Pinned tells whether userland may not change the task's affinity.
func (s Stat) Pinned() bool { return s.Flags&PFNoSetAffinity != 0 }

// ReadStat parses a stat file: the comm in parentheses (which may hold
// spaces and parentheses: the last ')' ends it), then fields 3 on.
func ReadStat(file string) (Stat, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(file, data)
}

// ParseStat parses the content of the stat file named file (for errors).
// The comm is skipped: the audit names threads from their status file.
func ParseStat(file string, data []byte) (Stat, error) {
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("%s: no comm in parentheses", file)
	}
	fields := strings.Fields(s[end+1:])
	// fields[0] is field 3 (state): field n is fields[n-3].
	if len(fields) < 20 {
		return Stat{}, fmt.Errorf("%s: %d fields after the comm, want at least 20", file, len(fields))
	}
	var st Stat
	var errs [2]error
	st.Flags, errs[0] = strconv.ParseUint(fields[9-3], 10, 64)
	st.Start, errs[1] = strconv.ParseUint(fields[22-3], 10, 64)
	for _, err := range errs {
		if err != nil {
			return Stat{}, fmt.Errorf("%s: %w", file, err)
		}
	}
	return st, nil
}

// CgroupPaths are the paths of a /proc/<pid>/cgroup file's lines
// (hierarchy-ID:controllers:path; one line on cgroup v2, one per hierarchy
// on v1; a path may hold colons).
func CgroupPaths(content string) []string {
	var out []string
	for _, line := range strings.Split(content, "\n") {
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if _, path, ok := strings.Cut(rest, ":"); ok {
			out = append(out, strings.TrimSpace(path))
		}
	}
	return out
}
