// Package crashfs is a hostfiles.FS for kill -9 tests: it is the host's
// file system (or Inner) until the CrashAt-th mutating call, at which the
// process "dies", just before that call or, with After, just after it;
// every later mutating call fails, as if the process were gone. A test
// counts the mutating calls of a life that does not die (Mutations), then
// kills one life at each of them and starts another process on the same
// files and journal.
//
// Mutating calls are the FS's writes, replaces and renames, and whatever
// a fake routes through Mutate (a D-Bus property set).
package crashfs

import (
	"errors"
	"sync"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// ErrKilled is what every call fails with once the process died.
var ErrKilled = errors.New("process killed (test)")

// FS is the dying process's file system. The zero value never dies (a
// clean life, to count its mutations).
type FS struct {
	// Inner does the work (an AffinityFS, a SystemdFS's base); nil: the
	// host's files.
	Inner hostfiles.FS
	// CrashAt is the 1-based mutating call at which the process dies; 0:
	// never. After: just after performing it, else just before.
	CrashAt int
	After   bool

	mu        sync.Mutex
	mutations int
	crashed   bool
	writes    map[string]int
}

var _ hostfiles.FS = (*FS)(nil)

func (f *FS) fs() hostfiles.FS {
	if f.Inner != nil {
		return f.Inner
	}
	return hostfiles.OS{}
}

// Mutate counts do as a mutating call and performs it unless the process
// dies before it.
func (f *FS) Mutate(do func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return ErrKilled
	}
	f.mutations++
	if f.CrashAt == f.mutations && !f.After {
		f.crashed = true
		return ErrKilled
	}
	err := do()
	if f.CrashAt == f.mutations {
		f.crashed = true
		return ErrKilled
	}
	return err
}

// Crashed tells whether the process died.
func (f *FS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// Mutations counts the mutating calls so far, the fatal one included.
func (f *FS) Mutations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mutations
}

// Writes counts the WriteFile calls performed on path (the fatal one
// only with After).
func (f *FS) Writes(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes[path]
}

// ReadFile reads through Inner; reads never kill.
func (f *FS) ReadFile(path string) ([]byte, error) { return f.fs().ReadFile(path) }

// WriteFile is a mutating call.
func (f *FS) WriteFile(path string, data []byte) error {
	return f.Mutate(func() error {
		if f.writes == nil {
			f.writes = map[string]int{}
		}
		f.writes[path]++
		return f.fs().WriteFile(path, data)
	})
}

// ReplaceFile is a mutating call.
func (f *FS) ReplaceFile(path string, data []byte) error {
	return f.Mutate(func() error { return f.fs().ReplaceFile(path, data) })
}

// Rename is a mutating call.
func (f *FS) Rename(from, to string) error {
	return f.Mutate(func() error { return f.fs().Rename(from, to) })
}
