package atomicfile

// Files found unusable when loaded: the daemon's files (the state, the
// kubelet grants, the DRA claims) are memories, rebuilt from the runtime
// when lost, so a file that cannot be used must never stop the daemon (and
// with it all pinning). Nor may a rebuilt copy replace it: a file that
// cannot be read (EIO, EACCES) may be a good one, and a corrupt one may
// still hold records an operator can read. So such a file is moved aside,
// and when even that fails (a state directory that went read-only) it is
// left as it is and the writer moves it before its first write, writing
// nothing until it can. One home for the three files.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The kinds of unusable files, in the name a file is moved to.
const (
	// KindCorrupt is a file read but refused: truncated, not JSON, of
	// an unknown schema, incomplete.
	KindCorrupt = "corrupt"
	// KindUnreadable is a file that could not be read (EIO, EACCES) or
	// is no regular file (a directory, a named pipe, a device, a socket).
	KindUnreadable = "unreadable"
)

// asideTime formats the time in the name a file is moved to.
const asideTime = "20060102T150405.000000000Z"

// Rename moves a file: os.Rename, which tests replace to fail where the
// directory stays writable.
type Rename func(from, to string) error

// Discarded is a file Load found unusable: why, and where it was moved to
// or, when that failed, is to be moved to before anything replaces it.
type Discarded struct {
	Path string
	// Kind is KindCorrupt or KindUnreadable.
	Kind string
	// Problem says what is wrong with the file.
	Problem error
	// Aside is <Path>.<Kind>-<time>.
	Aside string
	// At is when the file was found unusable.
	At time.Time
	// Unmoved is the rename's error while the file is still at Path
	// (see Move); nil once it has been moved.
	Unmoved error
}

// String says what happened to the file, for the log.
func (d *Discarded) String() string {
	if d.Unmoved != nil {
		return fmt.Sprintf("%s: %v; it could not be moved aside (%v), so it is left as it is and nothing replaces it until it is moved to %s", d.Path, d.Problem, d.Unmoved, d.Aside)
	}
	return fmt.Sprintf("%s: %v; moved to %s", d.Path, d.Problem, d.Aside)
}

// Move moves the file aside if Load could not: a writer calls it before
// each write of Path, and writes nothing while it fails, so that a rebuilt
// copy never replaces the only copy of what the file held. A nil d, or a
// file already moved (or gone), is nothing to do.
func (d *Discarded) Move(rename Rename) error {
	if d == nil || d.Unmoved == nil {
		return nil
	}
	if err := rename(d.Path, d.Aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is not replaced: the file found at start (%v) must first be moved to %s, which failed: %w", d.Path, d.Problem, d.Aside, err)
	}
	d.Unmoved = nil
	return nil
}

// Load reads path and hands its content to use, which parses it or says
// what is wrong with it. A missing file is not read (use is not called)
// and gives nil. A file that cannot be read (also one that is no regular
// file: a named pipe, which os.ReadFile would wait on for a writer that
// never comes, hanging the daemon's start), or that use refuses, is moved
// to <path>.<kind>-<time> and described by the Discarded returned; when
// the move fails, the Discarded's Unmoved says so, and the caller's writer
// must Move it before it writes. The caller starts empty in both cases.
func Load(path string, now time.Time, rename Rename, use func([]byte) error) *Discarded {
	data, err := ReadRegular(path, NoLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	d := &Discarded{Path: path, Kind: KindCorrupt, At: now}
	if err != nil {
		d.Kind, d.Problem = KindUnreadable, fmt.Errorf("cannot be read: %w", err)
	} else if d.Problem = use(data); d.Problem == nil {
		return nil
	}
	d.Aside = fmt.Sprintf("%s.%s-%s", path, d.Kind, now.UTC().Format(asideTime))
	d.Unmoved = rename(path, d.Aside)
	return d
}

// Newest is the newest file Load moved aside from path at an earlier
// start (by the time in its name), or nil when there is none: what a
// restarted daemon knows of a loss an earlier process found, for as long
// as the operator keeps the file (that record lived only in
// the memory of the process that moved the file). Only names are read, in
// path's directory; its Problem says it was found at an earlier start.
func Newest(path string) *Discarded {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil
	}
	var newest *Discarded
	base := filepath.Base(path) + "."
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), base)
		if !ok {
			continue
		}
		kind, stamp, ok := strings.Cut(rest, "-")
		if kind != KindCorrupt && kind != KindUnreadable || !ok {
			continue
		}
		at, err := time.Parse(asideTime, stamp)
		if err != nil || newest != nil && !at.After(newest.At) {
			continue
		}
		newest = &Discarded{Path: path, Kind: kind, Aside: filepath.Join(filepath.Dir(path), e.Name()), At: at,
			Problem: fmt.Errorf("found %s at an earlier start", kind)}
	}
	return newest
}
