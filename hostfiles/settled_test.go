package hostfiles

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// countFS counts the reads of the host files (not the journal) it passes
// to the FS it wraps.
type countFS struct {
	FS
	tr    *tree
	mu    sync.Mutex
	reads map[string]int
}

func newCountFS(inner FS, tr *tree) *countFS {
	return &countFS{FS: inner, tr: tr, reads: map[string]int{}}
}

func (f *countFS) ReadFile(path string) ([]byte, error) {
	if strings.HasPrefix(path, f.tr.path("")) {
		f.mu.Lock()
		f.reads[path]++
		f.mu.Unlock()
	}
	return f.FS.ReadFile(path)
}

// take returns the reads counted since the last take, by name.
func (f *countFS) take() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for path, n := range f.reads {
		rel, _ := filepath.Rel(f.tr.path(""), path)
		out[rel] = n
	}
	f.reads = map[string]int{}
	return out
}

// banSource keeps "IRQs" off banned CPUs as package irq does: each file's
// want is its original without the banned CPUs, and any content that
// avoids them meets it.
type banSource struct {
	paths  []string
	mu     sync.Mutex
	banned cpuset.CPUSet
	// reread: its plans say Plan.Reread.
	reread bool
}

func (s *banSource) Owner() string { return "irq" }

func (s *banSource) ban(cpus ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.banned = cpuset.New(cpus...)
}

func (s *banSource) setReread(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reread = on
}

func (s *banSource) Plan() (Plan, error) {
	s.mu.Lock()
	banned := s.banned
	plan := Plan{Reread: s.reread}
	s.mu.Unlock()
	for _, p := range s.paths {
		plan.Changes = append(plan.Changes, Change{Path: p,
			Want: func(original string) (string, error) {
				orig, err := cpuset.Parse(original)
				if err != nil {
					return "", err
				}
				return orig.Difference(banned).String(), nil
			},
			Satisfied: func(content, _ string) bool {
				set, err := cpuset.Parse(content)
				return err == nil && !set.IsEmpty() && set.Intersection(banned).IsEmpty()
			}})
	}
	return plan, nil
}

// irqTree is 64 "IRQs": three in four with affinity 0-7, the others 0-3.
func irqTree(t *testing.T) (*tree, *banSource) {
	files := map[string]string{}
	src := &banSource{banned: cpuset.New()}
	for n := range 64 {
		name := fmt.Sprintf("irq/%d/smp_affinity_list", n)
		files[name] = "0-7"
		if n%4 == 0 {
			files[name] = "0-3"
		}
	}
	tr := newTree(t, files)
	for name := range files {
		src.paths = append(src.paths, tr.path(name))
	}
	return tr, src
}

// requireAvoid checks that no IRQ file holds a banned CPU.
func requireAvoid(t *testing.T, tr *tree, banned cpuset.CPUSet, msg string) {
	t.Helper()
	for name := range tr.files {
		set, err := cpuset.Parse(tr.read(t, name))
		require.NoError(t, err)
		require.True(t, set.Intersection(banned).IsEmpty(), "%s: %s holds %s", msg, name, set)
	}
}

// TestKickedPassReadsOnlyWhatChanged: a pass kicked by a change reads
// only the files whose want that change may have moved: with the same
// wants it reads none of them (it read all 64 on every pass before,
// issue 45: 512 IRQs at each creation); with a CPU banned more it reads
// and writes the files that now hold it, and only those.
func TestKickedPassReadsOnlyWhatChanged(t *testing.T) {
	tr, src := irqTree(t)
	fsys := newCountFS(OS{}, tr)
	in := openInstance(t, fsys, tr, bootA, src)
	src.ban(6)
	require.NoError(t, in.r.Flush())
	assert.Len(t, fsys.take(), 64, "the first pass, a full one, reads every file")
	requireAvoid(t, tr, cpuset.New(6), "after the first pass")

	require.NoError(t, in.r.FlushKicked())
	assert.Empty(t, fsys.take(), "a kicked pass with the same wants reads no file")
	require.NoError(t, in.r.FlushKicked())
	assert.Empty(t, fsys.take(), "nor does the next")

	src.ban(2, 6)
	writes := in.r.Status().Writes
	require.NoError(t, in.r.FlushKicked())
	reads := fsys.take()
	requireAvoid(t, tr, cpuset.New(2, 6), "the kicked pass applied the changed want")
	written := in.r.Status().Writes - writes
	assert.EqualValues(t, 64, written, "every file held CPU 2")
	assert.Len(t, reads, int(written), "it read the files it wrote, and no other")

	src.ban(2, 6, 7)
	writes = in.r.Status().Writes
	require.NoError(t, in.r.FlushKicked())
	reads = fsys.take()
	requireAvoid(t, tr, cpuset.New(2, 6, 7), "the kicked pass applied the changed want")
	assert.EqualValues(t, 48, in.r.Status().Writes-writes, "the 0-7 files held CPU 7; the 0-3 ones did not")
	assert.Len(t, reads, 48, "it read the 48 files it wrote: the 16 others still avoid the banned CPUs")
	assert.Positive(t, in.r.Status().Settled)

	src.ban()
	require.NoError(t, in.r.FlushKicked())
	tr.requireOriginals(t, "with nothing banned every file has its original back")
	assert.Empty(t, onDisk(t, tr))
}

// TestRescanCorrectsDrift: a file written back behind the plugin's back
// after a pass found it as wanted is not read by the kicked passes (that
// is what they save), and the next full pass, the periodic rescan,
// corrects it, also while kicks keep coming: a kick's pass due when the
// rescan ticks becomes the rescan.
func TestRescanCorrectsDrift(t *testing.T) {
	tr, src := irqTree(t)
	in := openInstance(t, OS{}, tr, bootA, src)
	src.ban(6)
	require.NoError(t, in.r.Flush())
	drifted := tr.path("irq/1/smp_affinity_list")
	require.NoError(t, os.WriteFile(drifted, []byte("0-7\n"), 0o644)) // irqbalance, an admin
	require.NoError(t, in.r.FlushKicked())
	assert.Equal(t, "0-7", tr.read(t, "irq/1/smp_affinity_list"), "a kicked pass does not read a settled file")
	require.NoError(t, in.r.Flush())
	requireAvoid(t, tr, cpuset.New(6), "the rescan corrected the drift")

	// The goroutine's pace: kicks every 200 µs keep a kicked pass armed
	// (20 ms after the last pass) nearly all the time.
	tr2, src2 := irqTree(t)
	log := in.log
	j, _, err := OpenJournal(OS{}, tr2.journal(), bootA)
	require.NoError(t, err)
	r := NewReconciler(OS{}, j, log, Timing{Delay: 20 * time.Millisecond, MinInterval: 20 * time.Millisecond, Rescan: 150 * time.Millisecond,
		BackoffInitial: time.Millisecond, BackoffMax: 10 * time.Millisecond}, src2)
	t.Cleanup(r.Close)
	src2.ban(6)
	r.Start()
	r.Kick()
	require.Eventually(t, func() bool { return r.Status().Writes == 48 }, 5*time.Second, time.Millisecond)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
				r.Kick()
			}
		}
	}()
	// The kicks' passes run, and read nothing, before the drift is
	// written: waited for, not assumed (a late test goroutine, its write
	// just before a rescan, saw the rescan take the first kick's pass
	// and correct the drift before any kicked pass ran).
	start := r.Status()
	require.Eventually(t, func() bool {
		st := r.Status()
		return st.KickedPasses > start.KickedPasses && st.Settled > start.Settled
	}, 5*time.Second, time.Millisecond, "the kicked passes read nothing: every file is as the first pass left it")
	fullBefore := r.Status().FullPasses
	require.NoError(t, os.WriteFile(tr2.path("irq/1/smp_affinity_list"), []byte("0-7\n"), 0o644))
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(tr2.path("irq/1/smp_affinity_list"))
		return err == nil && strings.TrimSpace(string(data)) == "0-5,7"
	}, 2*time.Second, 5*time.Millisecond, "a rescan came and corrected the drift while kicks kept coming")
	assert.Greater(t, r.Status().FullPasses, fullBefore, "a full pass, the rescan, corrected it")
}

// TestKickedPassRereadsResettable: a thread's affinity (Resettable) that
// met its want is read again after a kicked pass's cgroup write resets
// it, and set again, as in a full pass. The cgroup and the thread are in
// directories of their own, as on a node.
func TestKickedPassRereadsResettable(t *testing.T) {
	tr := newTree(t, map[string]string{"cgroup/cpus": "0-7", "proc/1/task": "0-7"})
	src := &threadSource{tr: tr, cpus: "0-3", affinity: "0-1"}
	in := openInstance(t, threadFS{tr: tr}, tr, bootA, src)
	require.NoError(t, in.r.Flush())
	assert.Equal(t, "0-1", tr.read(t, "proc/1/task"))
	require.NoError(t, in.r.FlushKicked())
	src.cpus = "0-5" // the cgroup's write resets the thread to 0-5
	require.NoError(t, in.r.FlushKicked())
	assert.Equal(t, "0-5", tr.read(t, "cgroup/cpus"))
	assert.Equal(t, "0-1", tr.read(t, "proc/1/task"), "set again after the kicked pass's own reset")
}

// threadFS resets proc/1/task to what cgroup/cpus is given, as the
// kernel resets a thread's affinity when its cgroup's cpuset changes.
type threadFS struct {
	OS
	tr *tree
}

func (f threadFS) WriteFile(path string, data []byte) error {
	if err := f.OS.WriteFile(path, data); err != nil {
		return err
	}
	if path == f.tr.path("cgroup/cpus") {
		return f.OS.WriteFile(f.tr.path("proc/1/task"), data)
	}
	return nil
}

// threadSource narrows cgroup/cpus and wants proc/1/task, resettable,
// below it.
type threadSource struct {
	tr             *tree
	cpus, affinity string
}

func (s *threadSource) Owner() string { return "housekeeping" }

func (s *threadSource) Plan() (Plan, error) {
	return Plan{Changes: []Change{
		{Path: s.tr.path("cgroup/cpus"), Want: func(string) (string, error) { return s.cpus, nil }},
		{Path: s.tr.path("proc/1/task"), Order: -1, Resettable: true, Want: func(string) (string, error) { return s.affinity, nil }},
	}}, nil
}

// policyFS resets a cpufreq policy's "preference" when its "governor" is
// written, as intel_pstate does.
type policyFS struct {
	OS
	tr *tree
}

func (f policyFS) WriteFile(path string, data []byte) error {
	if err := f.OS.WriteFile(path, data); err != nil {
		return err
	}
	if filepath.Base(path) == "governor" {
		return f.OS.WriteFile(filepath.Join(filepath.Dir(path), "preference"), []byte("default\n"))
	}
	return nil
}

// TestKickedPassRereadsSiblings: a write may change the other files of
// its directory (a governor resets its policy's preference): they are
// read again at the next pass, kicked or not, not taken as known.
func TestKickedPassRereadsSiblings(t *testing.T) {
	tr := newTree(t, map[string]string{"policy0/governor": "powersave", "policy0/preference": "default"})
	src := newSource("power")
	src.set(map[string]string{tr.path("policy0/governor"): "powersave", tr.path("policy0/preference"): "performance"})
	in := openInstance(t, policyFS{tr: tr}, tr, bootA, src)
	require.NoError(t, in.r.Flush())
	assert.Equal(t, "performance", tr.read(t, "policy0/preference"))
	src.set(map[string]string{tr.path("policy0/governor"): "performance", tr.path("policy0/preference"): "performance"}) // resets the preference
	require.NoError(t, in.r.FlushKicked())
	assert.Equal(t, "default", tr.read(t, "policy0/preference"), "the governor's write reset it")
	require.NoError(t, in.r.FlushKicked())
	assert.Equal(t, "performance", tr.read(t, "policy0/preference"), "the next kicked pass read it and set it again")
}

// TestKickedPassRestoresWhatItsOriginalMeets: a changed file whose own
// original meets the changed want gets it back in a kicked pass, though
// what it holds (the plugin's value) meets that want too.
func TestKickedPassRestoresWhatItsOriginalMeets(t *testing.T) {
	tr := newTree(t, map[string]string{"irq/0/smp_affinity_list": "0-3"})
	src := &banSource{paths: []string{tr.path("irq/0/smp_affinity_list")}}
	in := openInstance(t, OS{}, tr, bootA, src)
	src.ban(3)
	require.NoError(t, in.r.Flush())
	assert.Equal(t, "0-2", tr.read(t, "irq/0/smp_affinity_list"))
	src.ban(7) // 0-3 avoids it, and so does 0-2
	require.NoError(t, in.r.FlushKicked())
	assert.Equal(t, "0-3", tr.read(t, "irq/0/smp_affinity_list"), "restored")
	assert.Empty(t, onDisk(t, tr))
}

// TestKickedPassVerifies: a Verify'd file (a partition) is read at every
// pass, kicked too: the kernel may find it invalid at any time.
func TestKickedPassVerifies(t *testing.T) {
	tr := newTree(t, map[string]string{"part": "member"})
	src := &verifySource{path: tr.path("part")}
	in := openInstance(t, OS{}, tr, bootA, src)
	require.NoError(t, in.r.Flush())
	require.Empty(t, in.r.Status().Failures)
	require.NoError(t, os.WriteFile(tr.path("part"), []byte("isolated invalid (Cpu list in cpuset.cpus not exclusive)\n"), 0o644))
	require.NoError(t, in.r.FlushKicked())
	require.Len(t, in.r.Status().Failures, 1, "the kicked pass read it and found it invalid")
	assert.True(t, in.r.Status().Failures[0].Invalid)
}

// verifySource wants "isolated" in one file, verified: a content saying
// "invalid" is the kernel's refusal.
type verifySource struct{ path string }

func (s *verifySource) Owner() string { return "partition" }

func (s *verifySource) Plan() (Plan, error) {
	return Plan{Changes: []Change{s.change()}}, nil
}

func (s *verifySource) change() Change {
	return Change{Path: s.path,
		Want:      func(string) (string, error) { return "isolated", nil },
		Satisfied: func(content, want string) bool { return strings.HasPrefix(content, want) },
		Verify: func(content string) error {
			if strings.Contains(content, "invalid") {
				return fmt.Errorf("partition invalid: %s", content)
			}
			return nil
		}}
}

// TestRereadReadsKnownFiles: a Plan with Reread has its files read by a
// kicked pass though what was read of them still meets the want: an
// "IRQ" read on CPUs 0-3, moved by irqbalance onto CPUs 3 and 7 while 7 was
// allowed, and CPU 7 banned since, is moved off in that pass, not at the
// rescan.
func TestRereadReadsKnownFiles(t *testing.T) {
	tr, src := irqTree(t)
	fsys := newCountFS(OS{}, tr)
	in := openInstance(t, fsys, tr, bootA, src)
	src.ban(6)
	require.NoError(t, in.r.Flush())
	require.Equal(t, "0-3", tr.read(t, "irq/4/smp_affinity_list"))
	require.NoError(t, os.WriteFile(tr.path("irq/4/smp_affinity_list"), []byte("3,7\n"), 0o644)) // irqbalance: CPU 7 is allowed
	fsys.take()

	src.ban(6, 7)
	src.setReread(true)
	require.NoError(t, in.r.FlushKicked())
	assert.Len(t, fsys.take(), 64, "the pass read every file of the plan")
	requireAvoid(t, tr, cpuset.New(6, 7), "the pass kept every file off CPU 7")

	src.setReread(false)
	require.NoError(t, in.r.FlushKicked())
	assert.Empty(t, fsys.take(), "without Reread, the files known to meet the want are settled")
}

// memReadFS is the real file system whose files in data (once set) read
// what data holds, from memory, without allocating: a pass's own
// allocations per file are then what is counted.
type memReadFS struct {
	FS
	mu   sync.Mutex
	data map[string][]byte
}

func (f *memReadFS) ReadFile(path string) ([]byte, error) {
	f.mu.Lock()
	d, ok := f.data[path]
	f.mu.Unlock()
	if ok {
		return d, nil
	}
	return f.FS.ReadFile(path)
}

// verifySources wants "isolated" in each of its files, verified, as
// package partition does for cpuset.cpus.partition: read at every pass.
type verifySources struct{ changes []Change }

func (s *verifySources) Owner() string { return "partition" }

func (s *verifySources) Plan() (Plan, error) { return Plan{Changes: s.changes}, nil }

// verifiedFromMemory is an instance with n verified files, half of them
// made isolated by its first pass, whose reads from then on come from
// memory (what the pass wrote): the passes after it read every file as
// known.
func verifiedFromMemory(t *testing.T, n int) *instance {
	t.Helper()
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("p%d", i)] = []string{"member", "isolated"}[i%2]
	}
	tr := newTree(t, files)
	src := &verifySources{}
	for name := range files {
		src.changes = append(src.changes, (&verifySource{path: tr.path(name)}).change())
	}
	mem := &memReadFS{FS: OS{}}
	in := openInstance(t, mem, tr, bootA, src)
	require.NoError(t, in.r.Flush())
	data := map[string][]byte{}
	for name := range files {
		require.Equal(t, "isolated", tr.read(t, name))
		data[tr.path(name)] = []byte("isolated\n")
	}
	mem.mu.Lock()
	mem.data = data
	mem.mu.Unlock()
	return in
}

// TestVerifiedReadsMakeNoContent: the files read at every pass (Verify)
// that read what was known cost the pass no new content string, whether
// the plugin wrote them (journaled) or found them meeting their want
// (issue 45: each read made its content three times, a pass's
// allocations grew with the partitions by as many per partition).
func TestVerifiedReadsMakeNoContent(t *testing.T) {
	perFile := func(n int) float64 {
		in := verifiedFromMemory(t, n)
		require.NoError(t, in.r.FlushKicked())
		return testing.AllocsPerRun(5, func() {
			if err := in.r.FlushKicked(); err != nil {
				t.Fatal(err)
			}
		}) / float64(n)
	}
	few, many := perFile(20), perFile(400)
	t.Logf("a kicked pass's allocations per verified file: %.2f with 20, %.2f with 400", few, many)
	assert.Less(t, many, 0.5, "allocations per verified file read as known")
}

// TestRescanReadsMakeNoContent: a rescan (Flush) reads every wanted file
// and forgets what was known, but a file that reads what the pass before
// it knew costs it no new content string (issue 45: with 1,000 running a
// rescan made some 500 more, one per file read).
func TestRescanReadsMakeNoContent(t *testing.T) {
	const n = 400
	in := verifiedFromMemory(t, n)
	require.NoError(t, in.r.Flush())
	perFile := testing.AllocsPerRun(5, func() {
		if err := in.r.Flush(); err != nil {
			t.Fatal(err)
		}
	}) / n
	t.Logf("a rescan's allocations per file read as known: %.2f", perFile)
	if !raceBuild {
		assert.Less(t, perFile, 0.5, "allocations per file read as the pass before knew it")
	}
}
