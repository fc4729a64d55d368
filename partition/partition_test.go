package partition

import (
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
	f := &fixture{root: root, fs: &recordingFS{root: root}}
	log, hook := logtest.NewNullLogger()
	f.hook = hook
	j, _, err := hostfiles.OpenJournal(f.fs, filepath.Join(t.TempDir(), hostfiles.JournalFile), "boot")
	require.NoError(t, err)
	f.src = NewSource(root, func() []Want {
		f.mu.Lock()
		defer f.mu.Unlock()
		return append([]Want(nil), f.wants...)
	}, log)
	f.r = hostfiles.NewReconciler(f.fs, j, log, hostfiles.DefaultTiming, f.src)
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
	mkCgroup(t, root, ctrA)
	assert.Len(t, f.want(t, Want{Dir: ctrA, CPUs: cpuset.New(4), Who: "a"}), 4)
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
