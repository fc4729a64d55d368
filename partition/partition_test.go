package partition

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// recordingFS is the real file system, noting every write.
type recordingFS struct {
	hostfiles.OS
	mu     sync.Mutex
	writes []string
	root   string
}

// WriteFile notes the writes that succeed (not those to a cgroup the
// runtime removed).
func (r *recordingFS) WriteFile(path string, data []byte) error {
	if err := r.OS.WriteFile(path, data); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rel, _ := filepath.Rel(r.root, path)
	r.writes = append(r.writes, rel+"="+strings.TrimSpace(string(data)))
	return nil
}

func (r *recordingFS) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes
	r.writes = nil
	return w
}

// hierarchy is a cgroup v2 fixture: the files of the cgroups given, as a
// 6.12 kernel shows them before anything is partitioned.
func hierarchy(t *testing.T, cgroups ...string) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "cpuset.cpus.isolated"), []byte("\n"), 0o644))
	for _, cg := range cgroups {
		mkCgroup(t, root, cg)
	}
	return root
}

// mkCgroup creates a cgroup and its missing ancestors with the cpuset
// files of each.
func mkCgroup(t *testing.T, root, cg string) {
	t.Helper()
	for d := filepath.Clean(cg); d != "/" && d != "."; d = filepath.Dir(d) {
		dir := filepath.Join(root, d)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for f, v := range map[string]string{exclusiveFile: "", partitionFile: "member", "cpuset.cpus": ""} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o644))
			}
		}
	}
}

func read(t *testing.T, root, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

type fixture struct {
	root  string
	fs    *recordingFS
	r     *hostfiles.Reconciler
	mu    sync.Mutex
	wants []Want
	hook  *logtest.Hook
	src   *Source
}

func newFixture(t *testing.T, root string) *fixture {
	t.Helper()
	return newFixtureFS(t, root, nil)
}

// newFixtureFS is newFixture on a file system that wrap makes of the
// recording one (nil: the recording one).
func newFixtureFS(t *testing.T, root string, wrap func(*recordingFS) hostfiles.FS) *fixture {
	t.Helper()
	f := &fixture{root: root, fs: &recordingFS{root: root}}
	var fsys hostfiles.FS = f.fs
	if wrap != nil {
		fsys = wrap(f.fs)
	}
	log, hook := logtest.NewNullLogger()
	f.hook = hook
	j, _, err := hostfiles.OpenJournal(fsys, filepath.Join(t.TempDir(), hostfiles.JournalFile), "boot")
	require.NoError(t, err)
	f.src = NewSource(root, func() []Want {
		f.mu.Lock()
		defer f.mu.Unlock()
		return append([]Want(nil), f.wants...)
	}, log)
	f.r = hostfiles.NewReconciler(fsys, j, log, hostfiles.DefaultTiming, f.src)
	t.Cleanup(f.r.Close)
	return f
}

func (f *fixture) want(t *testing.T, wants ...Want) []string {
	t.Helper()
	f.mu.Lock()
	f.wants = wants
	f.mu.Unlock()
	require.NoError(t, f.r.Flush())
	return f.fs.take()
}

const (
	podA = "/kubepods/poduid-a"
	ctrA = podA + "/ctr-a"
	podB = "/kubepods/burstable/poduid-b"
	ctrB = podB + "/ctr-b"
)

// TestPartitionsTopDownAndBack: the ancestors take the CPUs top-down, then
// the container, then it becomes isolated; when a container ends its
// pod's files go back and the shared ancestor gives its CPUs back, deepest
// first; at the end everything is exactly as before.
func TestPartitionsTopDownAndBack(t *testing.T) {
	root := hierarchy(t, ctrA, ctrB)
	f := newFixture(t, root)
	writes := f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4, 5), Who: "a"})
	assert.Equal(t, []string{"kubepods/cpuset.cpus.exclusive=4-5", "kubepods/poduid-a/cpuset.cpus.exclusive=4-5",
		"kubepods/poduid-a/ctr-a/cpuset.cpus.exclusive=4-5", "kubepods/poduid-a/ctr-a/cpuset.cpus.partition=isolated"}, writes)

	writes = f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4, 5), Who: "a"}, Want{Dir: ctrB, CPUs: cpuset.New(6), Who: "b"})
	assert.Equal(t, []string{"kubepods/cpuset.cpus.exclusive=4-6", "kubepods/burstable/cpuset.cpus.exclusive=6",
		"kubepods/burstable/poduid-b/cpuset.cpus.exclusive=6", "kubepods/burstable/poduid-b/ctr-b/cpuset.cpus.exclusive=6",
		"kubepods/burstable/poduid-b/ctr-b/cpuset.cpus.partition=isolated"}, writes)
	assert.Equal(t, "4-6", read(t, root, "kubepods/cpuset.cpus.exclusive"))

	// A's container ends: the runtime removes its cgroup.
	require.NoError(t, os.RemoveAll(filepath.Join(root, ctrA)))
	writes = f.want(t, Want{Dir: ctrB, CPUs: cpuset.New(6), Who: "b"})
	assert.Equal(t, []string{"kubepods/poduid-a/cpuset.cpus.exclusive=", "kubepods/cpuset.cpus.exclusive=6"}, writes,
		"the pod gives back first, then its parent")

	writes = f.want(t)
	assert.Equal(t, []string{"kubepods/burstable/poduid-b/ctr-b/cpuset.cpus.partition=member", "kubepods/burstable/poduid-b/ctr-b/cpuset.cpus.exclusive=",
		"kubepods/burstable/poduid-b/cpuset.cpus.exclusive=", "kubepods/burstable/cpuset.cpus.exclusive=", "kubepods/cpuset.cpus.exclusive="}, writes)
	for _, cg := range []string{"kubepods", "kubepods/burstable", podB, ctrB, podA} {
		assert.Equal(t, "", read(t, root, filepath.Join(cg, exclusiveFile)), cg)
	}
	assert.Equal(t, "member", read(t, root, filepath.Join(ctrB, partitionFile)))
}

// TestPartitionKeepsWhatAncestorsHad: an ancestor that already had
// exclusive CPUs (another remote partition, OVS-DPDK's) keeps them and
// gets exactly them back.
func TestPartitionKeepsWhatAncestorsHad(t *testing.T) {
	root := hierarchy(t, ctrA, "/ovs.slice")
	require.NoError(t, os.WriteFile(filepath.Join(root, "kubepods", exclusiveFile), []byte("2\n"), 0o644))
	f := newFixture(t, root)
	f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4), Who: "a"})
	assert.Equal(t, "2,4", read(t, root, "kubepods/cpuset.cpus.exclusive"))
	f.want(t)
	assert.Equal(t, "2", read(t, root, "kubepods/cpuset.cpus.exclusive"))
}

// TestNotYetCreated: a container whose cgroup does not exist yet (the
// reply came before the runtime created it) is partitioned by a later
// pass.
func TestNotYetCreated(t *testing.T) {
	root := hierarchy(t, podA)
	f := newFixture(t, root)
	assert.Empty(t, f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4), Who: "a"}))
	plan, err := f.src.Plan()
	require.NoError(t, err)
	assert.True(t, plan.Pending, "a cgroup not created yet: the plan is pending")
	assert.Empty(t, plan.Changes)
	mkCgroup(t, root, ctrA)
	assert.Len(t, f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4), Who: "a"}), 4)
	plan, err = f.src.Plan()
	require.NoError(t, err)
	assert.False(t, plan.Pending, "the cgroup created")
	assert.Empty(t, f.hook.AllEntries(), "nothing to warn of")
}

// TestFallbacks: cgroup v1 and a kernel without cpuset.cpus.exclusive
// write nothing and warn once per container, saying why.
func TestFallbacks(t *testing.T) {
	v1 := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(v1, "cpuset", ctrA), 0o755))
	f := newFixture(t, v1)
	assert.Empty(t, f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4), Who: "telco/dpdk/fwd"}))
	assert.Empty(t, f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4), Who: "telco/dpdk/fwd"}))
	require.Len(t, f.hook.AllEntries(), 1)
	assert.Equal(t, logrus.WarnLevel, f.hook.LastEntry().Level)
	assert.Contains(t, f.hook.LastEntry().Message, "container telco/dpdk/fwd: not in an isolated partition: cgroup v1")

	old := hierarchy(t)
	require.NoError(t, os.MkdirAll(filepath.Join(old, ctrA), 0o755))
	f = newFixture(t, old)
	assert.Empty(t, f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4), Who: "a"}))
	assert.Contains(t, f.hook.LastEntry().Message, "needs Linux 6.7 or later")
	assert.Len(t, f.src.Problems(), 1)
}

// invalidatingFS is the real file system where the kernel accepts
// "isolated" in some cgroups' cpuset.cpus.partition and then finds the
// partition invalid, as it does when a sibling has the CPUs exclusively.
type invalidatingFS struct {
	*recordingFS
	invalid map[string]bool
}

const notExclusive = "isolated invalid (Cpu list in cpuset.cpus not exclusive)"

func (f *invalidatingFS) WriteFile(path string, data []byte) error {
	if err := f.recordingFS.WriteFile(path, data); err != nil || !f.invalid[path] || strings.TrimSpace(string(data)) != "isolated" {
		return err
	}
	return os.WriteFile(path, []byte(notExclusive+"\n"), 0o644)
}

// TestInvalidPartitionReported: a partition the kernel reads back as
// "isolated invalid (<reason>)" is a problem, not done: logged once with
// the container and the reason, counted once, listed as a refused file of
// the owner cpuset; not written again while it stays so; cleared when the
// kernel finds it valid again; found when it turns invalid later; and
// restored like any partition when the container ends.
func TestInvalidPartitionReported(t *testing.T) {
	root := hierarchy(t, ctrA)
	file := filepath.Join(root, ctrA, partitionFile)
	f := newFixtureFS(t, root, func(r *recordingFS) hostfiles.FS {
		return &invalidatingFS{recordingFS: r, invalid: map[string]bool{file: true}}
	})
	hook := f.hook
	a := Want{Dir: ctrA, CPUs: cpuset.New(4, 5), Who: "telco/rt/loop"}

	problems := func() []hostfiles.Failure {
		var out []hostfiles.Failure
		for _, fl := range f.r.Status().Failures {
			if fl.Invalid {
				out = append(out, fl)
			}
		}
		return out
	}
	warnings := func() []string {
		var out []string
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel {
				out = append(out, e.Message)
			}
		}
		return out
	}

	f.want(t, a)
	assert.Equal(t, notExclusive, read(t, root, filepath.Join(ctrA, partitionFile)), "left as the kernel has it")
	require.Len(t, problems(), 1)
	p := problems()[0]
	assert.Equal(t, file, p.Path)
	assert.Equal(t, Owner, p.Owner)
	assert.Contains(t, p.Error, "container telco/rt/loop")
	assert.Contains(t, p.Error, "Cpu list in cpuset.cpus not exclusive")
	assert.EqualValues(t, 1, f.r.Status().PermanentErrors)
	require.Len(t, warnings(), 1)
	assert.Contains(t, warnings()[0], "container telco/rt/loop: the kernel made its isolated partition invalid (Cpu list in cpuset.cpus not exclusive)")
	assert.Contains(t, warnings()[0], file)

	assert.Empty(t, f.want(t, a), "not written again")
	assert.Len(t, problems(), 1, "still reported")
	assert.EqualValues(t, 1, f.r.Status().PermanentErrors, "counted once")
	assert.Len(t, warnings(), 1, "logged once")

	// The sibling gave its CPUs back: the kernel finds the partition valid.
	require.NoError(t, os.WriteFile(file, []byte("isolated\n"), 0o644))
	assert.Empty(t, f.want(t, a))
	assert.Empty(t, problems(), "valid again")

	// Later, the kernel invalidates it again, with no write of ours.
	require.NoError(t, os.WriteFile(file, []byte("isolated invalid\n"), 0o644))
	assert.Empty(t, f.want(t, a))
	require.Len(t, problems(), 1, "found at the next pass")
	assert.Contains(t, problems()[0].Error, "the kernel gives no reason")
	assert.EqualValues(t, 2, f.r.Status().PermanentErrors)
	assert.Len(t, warnings(), 2)

	// The container ends with its cgroup still there: its files go back.
	f.want(t)
	assert.Equal(t, "member", read(t, root, filepath.Join(ctrA, partitionFile)))
	assert.Equal(t, "", read(t, root, "kubepods/cpuset.cpus.exclusive"))
	assert.Empty(t, f.r.Status().Failures)
}

// TestExclusiveSettledWithoutSets: a cpuset.cpus.exclusive that reads its
// want as written (what a pass finds for every partition and ancestor,
// since the kernel shows the list in CPUSet.String's form) is taken as
// satisfied, and as giving nothing back, without a set made (issue 45: a
// pass's allocations grew with the exclusive containers); other forms are
// still compared as sets.
func TestExclusiveSettledWithoutSets(t *testing.T) {
	s := NewSource(t.TempDir(), nil, logrus.New())
	cpus := cpuset.New(0, 1, 2, 3, 8, 10, 11, 64, 65, 200)
	ch := s.exclusive("/sys/fs/cgroup/kubepods/pod1/c1", 3, func(string) (cpuset.CPUSet, error) { return cpus, nil })
	want, err := ch.Want("")
	require.NoError(t, err)
	require.Equal(t, "0-3,8,10-11,64-65,200", want)
	empty := s.exclusive("/sys/fs/cgroup/kubepods", 1, func(string) (cpuset.CPUSet, error) { return cpuset.New(), nil })
	assert.True(t, empty.Satisfied("\n", ""), "an empty list meets an empty want")
	assert.False(t, empty.Gives("", ""))
	assert.False(t, empty.Satisfied("3", ""))
	assert.True(t, empty.Gives("3", ""))

	shown := want + "\n"
	allocs := testing.AllocsPerRun(100, func() {
		if !ch.Satisfied(shown, want) || ch.Gives(want, want) {
			t.Fatal("the want as written is not satisfied, or gives back")
		}
		// The original of a cgroup the plugin has not written.
		if ch.Satisfied("\n", want) || ch.Gives("", want) {
			t.Fatal("an empty list meets the want, or gives back")
		}
	})
	assert.Zero(t, allocs, "allocations to compare a list that reads its want as written")

	for _, c := range []struct {
		content          string
		satisfied, gives bool
	}{
		{"0,1,2,3,8,10,11,64,65,200", true, false},
		{"0-3,8,10-11,64-65", false, false},
		{"0-3,8,10-11,64-65,200-201", false, true},
		{"garbage", false, false},
		{"", false, false},
		{" \n", false, false},
	} {
		assert.Equal(t, c.satisfied, ch.Satisfied(c.content, want), "Satisfied(%q)", c.content)
		assert.Equal(t, c.gives, ch.Gives(c.content, want), "Gives(%q)", c.content)
	}
}

// podWants is n exclusive containers, each in a pod of its own below
// /kubepods, with two CPUs each: their cgroups and their Wants.
func podWants(n int) (cgroups []string, wants []Want) {
	for i := 0; i < n; i++ {
		ctr := fmt.Sprintf("/kubepods/poduid-%d/ctr-%d", i, i)
		cgroups = append(cgroups, ctr)
		wants = append(wants, Want{Dir: ctr, CPUs: cpuset.New(2*i, 2*i+1), Who: ctr})
	}
	return cgroups, wants
}

// TestPlanAllocationsPerContainerFlat: a plan's allocations per container
// do not grow with the containers (issue 45). Every container's pod is
// below /kubepods, whose exclusive CPUs are those of all of them: grown by
// a union per container, that set alone made a pass's allocations grow
// with the square of the containers.
func TestPlanAllocationsPerContainerFlat(t *testing.T) {
	perContainer := func(n int) float64 {
		cgroups, wants := podWants(n)
		s := NewSource(hierarchy(t, cgroups...), func() []Want { return wants }, logrus.New())
		plan, err := s.Plan()
		require.NoError(t, err)
		require.Len(t, plan.Changes, 2*n+n+1, "each container's two files, its pod's and /kubepods' exclusive CPUs")
		return testing.AllocsPerRun(5, func() {
			if _, err := s.Plan(); err != nil {
				t.Fatal(err)
			}
		}) / float64(n)
	}
	few, many := perContainer(20), perContainer(800)
	t.Logf("a plan's allocations per container: %.1f with 20, %.1f with 800", few, many)
	assert.LessOrEqual(t, many, few*1.1+1, "allocations per container with 800 containers (%.1f) against 20 (%.1f)", many, few)
}

// TestExclusiveDriftRewritten: exclusive lists changed behind the plugin's
// back, emptied or to another list, are written back by the next full
// pass (the rescan), and one that reads the want in another form is left
// alone (the text no longer matches, the sets still do).
func TestExclusiveDriftRewritten(t *testing.T) {
	root := hierarchy(t, ctrA)
	f := newFixture(t, root)
	a := Want{Dir: ctrA, CPUs: cpuset.New(4, 5, 6), Who: "a"}
	f.want(t, a)
	for rel, content := range map[string]string{"kubepods": "", podA: "4", ctrA: "4,5,6"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, rel, exclusiveFile), []byte(content+"\n"), 0o644))
	}
	assert.ElementsMatch(t, []string{"kubepods/cpuset.cpus.exclusive=4-6", "kubepods/poduid-a/cpuset.cpus.exclusive=4-6"}, f.want(t, a))
	assert.Equal(t, "4,5,6", read(t, root, filepath.Join(ctrA, exclusiveFile)))
}

// TestContainerPlanKept: a container whose want did not change since the
// last pass is planned from what that pass made (its paths and changes),
// so a pass makes fewer objects per container (issue 45); a container
// whose CPUs changed gets its new want written, top-down when it grows,
// bottom-up when it shrinks.
func TestContainerPlanKept(t *testing.T) {
	const n = 200
	cgroups, wants := podWants(n)
	s := NewSource(hierarchy(t, cgroups...), func() []Want { return wants }, logrus.New())
	_, err := s.Plan()
	require.NoError(t, err)
	per := testing.AllocsPerRun(5, func() {
		if _, err := s.Plan(); err != nil {
			t.Fatal(err)
		}
	}) / n
	t.Logf("a plan's allocations per unchanged container: %.1f", per)
	// A stat of its exclusive file is left (the path's bytes, about 1);
	// two os.Stats were about 3 more (about 4); made again at every
	// pass, the pod's exclusive change was about 9 more (about 13), the
	// container's paths and changes about 9 more again (about 22).
	assert.LessOrEqual(t, per, 2.0, "a plan's allocations per unchanged container")

	// A container renamed is planned anew: its invalid partition's error
	// names it as it is now.
	wants[0].Who = "renamed"
	plan, err := s.Plan()
	require.NoError(t, err)
	verified := false
	for _, ch := range plan.Changes {
		if strings.HasSuffix(ch.Path, "/ctr-0/cpuset.cpus.partition") {
			assert.ErrorContains(t, ch.Verify("isolated invalid (test)"), "container renamed:")
			verified = true
		}
	}
	assert.True(t, verified, "no partition change for ctr-0")
	// What no pass wants is not kept.
	wants = wants[:10]
	_, err = s.Plan()
	require.NoError(t, err)
	assert.Equal(t, 10, len(s.planned), "plans kept for containers no pass wants")
	assert.Equal(t, 11, len(s.ancestors), "ancestors' plans kept with no partition below them (10 pods and /kubepods)")

	f := newFixture(t, hierarchy(t, ctrA))
	f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4, 5), Who: "a"})
	assert.Equal(t, []string{"kubepods/cpuset.cpus.exclusive=4-6", "kubepods/poduid-a/cpuset.cpus.exclusive=4-6",
		"kubepods/poduid-a/ctr-a/cpuset.cpus.exclusive=4-6"}, f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4, 5, 6), Who: "a"}))
	assert.Equal(t, []string{"kubepods/poduid-a/ctr-a/cpuset.cpus.exclusive=4", "kubepods/poduid-a/cpuset.cpus.exclusive=4",
		"kubepods/cpuset.cpus.exclusive=4"}, f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4), Who: "a"}))
}

// TestAncestorPlanFollowsCPUs: an ancestor's change, kept between passes
// while the CPUs below it stay the same, follows them when they change: a
// partition added below it, one whose CPUs changed, one that ended.
func TestAncestorPlanFollowsCPUs(t *testing.T) {
	ctrA2 := podA + "/ctr-a2"
	f := newFixture(t, hierarchy(t, ctrA, ctrA2))
	a := Want{Dir: ctrA, CPUs: cpuset.New(4, 5), Who: "a"}
	a2 := Want{Dir: ctrA2, CPUs: cpuset.New(8), Who: "a2"}
	f.want(t, a)
	assert.Empty(t, f.want(t, a), "a pass with nothing changed")
	assert.ElementsMatch(t, []string{"kubepods/cpuset.cpus.exclusive=4-5,8", "kubepods/poduid-a/cpuset.cpus.exclusive=4-5,8",
		"kubepods/poduid-a/ctr-a2/cpuset.cpus.exclusive=8", "kubepods/poduid-a/ctr-a2/cpuset.cpus.partition=isolated"}, f.want(t, a, a2))
	assert.Empty(t, f.want(t, a2, a), "a pass with nothing changed")
	a2.CPUs = cpuset.New(9)
	assert.ElementsMatch(t, []string{"kubepods/poduid-a/ctr-a2/cpuset.cpus.exclusive=9", "kubepods/poduid-a/cpuset.cpus.exclusive=4-5,9",
		"kubepods/cpuset.cpus.exclusive=4-5,9"}, f.want(t, a, a2))
	// With ctr-a2 gone from the wants, the ancestors give its CPU back.
	got := f.want(t, a)
	assert.Contains(t, got, "kubepods/poduid-a/cpuset.cpus.exclusive=4-5")
	assert.Contains(t, got, "kubepods/cpuset.cpus.exclusive=4-5")
	assert.Equal(t, "4-5", read(t, f.root, filepath.Join(podA, exclusiveFile)))
	assert.Equal(t, "4-5", read(t, f.root, filepath.Join("kubepods", exclusiveFile)))
}

// TestExclusiveWantKept: a kept change asked for its want again from the
// same original (what every pass does, the journal's original) makes
// nothing (issue 45); from another original, or after one that fails, it
// is worked out again.
func TestExclusiveWantKept(t *testing.T) {
	s := NewSource(t.TempDir(), nil, logrus.New())
	cpus := cpuset.New(4, 5)
	ch := s.exclusive("/sys/fs/cgroup/kubepods", 1, func(original string) (cpuset.CPUSet, error) {
		orig, err := cpuset.Parse(original)
		if err != nil {
			return cpuset.New(), err
		}
		return orig.Union(cpus), nil
	})
	wantOf := func(original string) string {
		t.Helper()
		want, err := ch.Want(original)
		require.NoError(t, err)
		return want
	}
	require.Equal(t, "1-2,4-5", wantOf("1-2"))
	allocs := testing.AllocsPerRun(100, func() {
		if want, err := ch.Want("1-2"); err != nil || want != "1-2,4-5" {
			t.Fatalf("want %q, %v", want, err)
		}
	})
	assert.Zero(t, allocs, "allocations of a want asked again from the same original")
	assert.Equal(t, "4-5,7", wantOf("7"))
	_, err := ch.Want("garbage")
	assert.Error(t, err)
	assert.Equal(t, "4-5,7", wantOf("7"))
	assert.Equal(t, "1-2,4-5", wantOf("1-2"))
}
