package hostfiles

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
)

const bootA = "2c1d7a0e-0b7e-4d4c-9a55-6f3c1f5e9a01"

// tree is a directory of fixture "host files" with their original content.
type tree struct {
	dir   string
	files map[string]string // name → original content
}

func newTree(t *testing.T, files map[string]string) *tree {
	t.Helper()
	tr := &tree{dir: t.TempDir(), files: files}
	for name, content := range files {
		p := tr.path(name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content+"\n"), 0o644))
	}
	return tr
}

func (tr *tree) path(name string) string { return filepath.Join(tr.dir, "host", name) }
func (tr *tree) journal() string         { return filepath.Join(tr.dir, "state", JournalFile) }

func (tr *tree) read(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(tr.path(name))
	require.NoError(t, err)
	return strings.TrimRight(string(data), "\n")
}

// requireOriginals checks that every file holds its original content.
func (tr *tree) requireOriginals(t *testing.T, msg string) {
	t.Helper()
	for name, content := range tr.files {
		if _, err := os.Stat(tr.path(name)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.Equal(t, content, tr.read(t, name), "%s: %s is back to its original", msg, name)
	}
}

// fakeSource wants files changed by a function of their original.
type fakeSource struct {
	owner string
	mu    sync.Mutex
	want  map[string]func(string) (string, error)
	err   error
	// satisfied, if set, is every change's Satisfied.
	satisfied           func(content, want string) bool
	before, after       func() error
	beforeRan, afterRan int
	// ident are the files' identities (Identifier), by path.
	ident map[string]string
	// claims are the files it may want (Claimer).
	claims []string
	// wrote are the paths Change.Wrote was called with, in order.
	wrote []string
}

func newSource(owner string) *fakeSource {
	return &fakeSource{owner: owner, want: map[string]func(string) (string, error){}, ident: map[string]string{}}
}

// Identity implements Identifier: "" for a file not named.
func (s *fakeSource) Identity(path string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ident[path]
}

// identify sets the identities of files: path → identity.
func (s *fakeSource) identify(ids map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.ident, ids)
}

func (s *fakeSource) Owner() string { return s.owner }

// Claims implements Claimer: the files named in claims.
func (s *fakeSource) Claims(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.claims, path)
}

func (s *fakeSource) Plan() (Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return Plan{}, s.err
	}
	var plan Plan
	for _, p := range slices.Sorted(maps.Keys(s.want)) {
		plan.Changes = append(plan.Changes, Change{Path: p, Want: s.want[p], Satisfied: s.satisfied, Wrote: s.noteWrote})
	}
	plan.Before = func() error {
		s.beforeRan++
		if s.before != nil {
			return s.before()
		}
		return nil
	}
	plan.After = func() error {
		s.afterRan++
		if s.after != nil {
			return s.after()
		}
		return nil
	}
	return plan, nil
}

func (s *fakeSource) noteWrote(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrote = append(s.wrote, path)
}

// takeWrote returns the paths Change.Wrote was called with since the last
// call.
func (s *fakeSource) takeWrote() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.wrote
	s.wrote = nil
	return out
}

// set replaces the wanted files: path → fixed value.
func (s *fakeSource) set(values map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.want)
	for p, v := range values {
		s.want[p] = func(string) (string, error) { return v, nil }
	}
}

// derive replaces the wanted files: each gets its original plus suffix,
// so that a change computed from a changed file (not the original) shows.
func (s *fakeSource) derive(paths []string, suffix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.want)
	for _, p := range paths {
		s.want[p] = func(orig string) (string, error) { return orig + suffix, nil }
	}
}

func (s *fakeSource) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// op is one file operation as recordingFS saw it.
type op struct{ kind, path string }

// faultFS wraps the real file system: it records operations, returns
// errors for chosen paths, and can "crash" the process at the k-th
// mutating operation (before or after performing it): from then on every
// mutating operation fails, as if the process had died there.
type faultFS struct {
	OS
	mu sync.Mutex
	// errs are errors by path for WriteFile (and ReplaceFile for the
	// journal), returned until removed.
	errs map[string]error
	ops  []op
	// crashAt is the 1-based mutating operation at which the process
	// dies; 0 never. afterOp: it dies just after performing it.
	crashAt, mutations int
	afterOp, crashed   bool
}

var errCrashed = errors.New("process killed (test)")

func (f *faultFS) mutate(kind, path string, do func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return errCrashed
	}
	f.mutations++
	if f.crashAt == f.mutations && !f.afterOp {
		f.crashed = true
		return errCrashed
	}
	if err, ok := f.errs[path]; ok {
		f.ops = append(f.ops, op{kind + "!", path})
		if f.crashAt == f.mutations { // dies just after the refusal
			f.crashed = true
			return errCrashed
		}
		return err
	}
	f.ops = append(f.ops, op{kind, path})
	err := do()
	if f.crashAt == f.mutations {
		f.crashed = true
		return errCrashed
	}
	return err
}

func (f *faultFS) WriteFile(path string, data []byte) error {
	return f.mutate("write", path, func() error { return f.OS.WriteFile(path, data) })
}

func (f *faultFS) ReplaceFile(path string, data []byte) error {
	return f.mutate("replace", path, func() error { return f.OS.ReplaceFile(path, data) })
}

func (f *faultFS) Rename(from, to string) error {
	return f.mutate("rename", from, func() error { return f.OS.Rename(from, to) })
}

func (f *faultFS) setErr(path string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errs == nil {
		f.errs = map[string]error{}
	}
	if err == nil {
		delete(f.errs, path)
	} else {
		f.errs[path] = err
	}
}

func (f *faultFS) writesTo(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, o := range f.ops {
		if strings.HasPrefix(o.kind, "write") && o.path == path {
			n++
		}
	}
	return n
}

func (f *faultFS) takeOps() []op {
	f.mu.Lock()
	defer f.mu.Unlock()
	ops := f.ops
	f.ops = nil
	return ops
}

// pathErr is what the kernel's refusal looks like through os.
func pathErr(path string, errno syscall.Errno) error {
	return &os.PathError{Op: "write", Path: path, Err: errno}
}

// instance is one "process": a journal and a reconciler over fsys.
type instance struct {
	r    *Reconciler
	j    *Journal
	log  *logrus.Logger
	hook *logtest.Hook
}

func openInstance(t *testing.T, fsys FS, tr *tree, boot string, sources ...Source) *instance {
	t.Helper()
	log, hook := logtest.NewNullLogger()
	j, note, err := OpenJournal(fsys, tr.journal(), boot)
	require.NoError(t, err)
	if note != "" {
		log.Info(note)
	}
	r := NewReconciler(fsys, j, log, DefaultTiming, sources...)
	t.Cleanup(r.Close)
	return &instance{r: r, j: j, log: log, hook: hook}
}

// warnings are the warning lines logged so far.
func (in *instance) warnings() []string {
	var out []string
	for _, e := range in.hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			out = append(out, e.Message)
		}
	}
	return out
}

// onDisk reads the journal's records from its file.
func onDisk(t *testing.T, tr *tree) map[string]Record {
	t.Helper()
	j, _, err := OpenJournal(OS{}, tr.journal(), bootA)
	require.NoError(t, err)
	return j.Records()
}

func names(tr *tree, ns ...string) []string {
	var out []string
	for _, n := range ns {
		out = append(out, tr.path(n))
	}
	return out
}

func fmtOps(ops []op) string {
	var b strings.Builder
	for _, o := range ops {
		fmt.Fprintf(&b, "%s %s\n", o.kind, filepath.Base(filepath.Dir(o.path))+"/"+filepath.Base(o.path))
	}
	return b.String()
}
