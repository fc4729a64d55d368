package hostfiles

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resetFS is the host's files where writing "cpus" (a cgroup's cpuset)
// resets "task" (the affinity of its task) to what was written, as the
// kernel does.
type resetFS struct {
	OS
	tr *tree
	// down, when set, fails the writes of "cpus" for now (systemd away).
	down *bool
}

func (f resetFS) WriteFile(path string, data []byte) error {
	if filepath.Base(path) == "cpus" && f.down != nil && *f.down {
		return errors.New("connecting to systemd: connection refused")
	}
	if err := f.OS.WriteFile(path, data); err != nil {
		return err
	}
	if filepath.Base(path) == "cpus" {
		return f.OS.WriteFile(f.tr.path("task"), data)
	}
	return nil
}

// resetSource narrows "cpus" to want and wants "task" at its own value
// (affinity), resettable, below it.
type resetSource struct {
	tr             *tree
	want, affinity string
}

func (s *resetSource) Owner() string { return "housekeeping" }

func (s *resetSource) Plan() (Plan, error) {
	if s.want == "" {
		return Plan{}, nil
	}
	return Plan{Changes: []Change{
		{Path: s.tr.path("cpus"), Want: func(string) (string, error) { return s.want, nil }},
		{Path: s.tr.path("task"), Order: -1, Resettable: true, Want: func(string) (string, error) { return s.affinity, nil }},
	}}, nil
}

// TestResettable: a file another write of the pass resets (a thread's
// affinity, reset by its cgroup's cpuset) is recorded even when it meets
// the want, written after that write, and restored after its restore:
// it ends as it began, also when the next process restores it.
func TestResettable(t *testing.T) {
	tr := newTree(t, map[string]string{"cpus": "0-7", "task": "0-1"})
	fsys := resetFS{tr: tr}
	src := &resetSource{tr: tr, want: "0-3", affinity: "0-1"}
	in := openInstance(t, fsys, tr, bootA, src)
	require.NoError(t, in.r.Flush())
	assert.Equal(t, "0-3", tr.read(t, "cpus"))
	assert.Equal(t, "0-1", tr.read(t, "task"), "set again after the cpuset reset it")
	rec, ok := in.j.Get(tr.path("task"))
	require.True(t, ok, "recorded although it met the want")
	assert.Equal(t, "0-1", rec.Original)

	src.want = "0-2"
	require.NoError(t, in.r.Flush())
	assert.Equal(t, "0-1", tr.read(t, "task"), "a recorded one too")

	src.want = ""
	require.NoError(t, in.r.Flush())
	tr.requireOriginals(t, "released")
	assert.Equal(t, 0, in.j.Len())

	// The next process after a kill -9: the journal's Order restores the
	// task after its cgroup.
	src.want = "0-3"
	require.NoError(t, in.r.Flush())
	in.r.Close()
	next := openInstance(t, fsys, tr, bootA, &resetSource{tr: tr})
	require.NoError(t, next.r.Flush())
	tr.requireOriginals(t, "restored by the next process")
	assert.Equal(t, 0, next.j.Len())
}

// TestRestoreHeldBackByAFailedOne: while the restore of a record fails
// for now (systemd cannot be reached), the same owner's records of lower
// Order wait: restored first and dropped, the task's affinity would be
// reset by its cgroup's later restore, and its original lost.
func TestRestoreHeldBackByAFailedOne(t *testing.T) {
	tr := newTree(t, map[string]string{"cpus": "0-7", "task": "0-1"})
	down := false
	fsys := resetFS{tr: tr, down: &down}
	src := &resetSource{tr: tr, want: "0-3", affinity: "0-1"}
	in := openInstance(t, fsys, tr, bootA, src)
	require.NoError(t, in.r.Flush())

	src.want, down = "", true
	require.Error(t, in.r.Flush(), "the cgroup's restore failed")
	_, ok := in.j.Get(tr.path("task"))
	assert.True(t, ok, "the task's record waits for its cgroup's restore")
	down = false
	require.NoError(t, in.r.Flush())
	tr.requireOriginals(t, "once the cgroup is back")
	assert.Equal(t, 0, in.j.Len())
}

// A preference restore that keeps failing EBUSY (intel_pstate while
// tuned holds the governor at performance) must not keep an unrelated
// owner's IRQ affinity from going back (a global hold-back,
// 05f44fc, reverted, kept it at 0-1 for good).
func TestATransientFailureOfOneOwnerHoldsBackNoOtherOwner(t *testing.T) {
	tr := newTree(t, map[string]string{"cpu/cpufreq/policy4/energy_performance_preference": "performance", "irq/30/smp_affinity_list": "0-1"})
	epp, irqf := tr.path("cpu/cpufreq/policy4/energy_performance_preference"), tr.path("irq/30/smp_affinity_list")
	fsys := &faultFS{}
	in := openInstance(t, fsys, tr, bootA, newSource("power"), newSource("irq"))
	require.NoError(t, in.j.Commit(map[string]Record{
		epp:  {Original: "balance_performance", Owner: "power", Order: 2},
		irqf: {Original: "0-15", Owner: "irq", Order: 0},
	}, nil))
	fsys.setErr(epp, pathErr(epp, syscall.EBUSY))
	for range 5 {
		_ = in.r.Flush()
	}
	assert.Equal(t, "0-15", tr.read(t, "irq/30/smp_affinity_list"), "the IRQ's original, whatever power's preference does")
}

// dirScoped is a Source whose files wait for one another only within
// their directory (HoldBackScoper), as power's do.
type dirScoped struct{ *fakeSource }

func (dirScoped) HoldBackScope(path string) string { return filepath.Dir(path) }

// TestScopedHoldBack: a Source that names the parts of its files
// (HoldBackScoper) has a restore that fails for now hold back only the
// lower-Order restores of its own part: an offline CPU's inactive
// cpufreq policy (EBUSY for every file) keeps no other CPU's files at
// their class. Within the part, the lower Order still
// waits; an owner that names no parts holds back all its records
// (TestRestoreHeldBackByAFailedOne).
func TestScopedHoldBack(t *testing.T) {
	files := map[string]string{
		"policy4/energy_performance_preference": "power", "policy4/scaling_max_freq": "2500000",
		"policy2/energy_performance_preference": "power", "policy2/scaling_governor": "performance",
	}
	tr := newTree(t, files)
	fsys := &faultFS{}
	in := openInstance(t, fsys, tr, bootA, dirScoped{newSource("power")})
	require.NoError(t, in.j.Commit(map[string]Record{
		tr.path("policy4/energy_performance_preference"): {Original: "balance_performance", Owner: "power", Order: 2},
		tr.path("policy4/scaling_max_freq"):              {Original: "3900000", Owner: "power", Order: 1},
		tr.path("policy2/energy_performance_preference"): {Original: "balance_performance", Owner: "power", Order: 2},
		tr.path("policy2/scaling_governor"):              {Original: "powersave", Owner: "power", Order: 0},
	}, nil))
	fsys.setErr(tr.path("policy4/energy_performance_preference"), pathErr(tr.path("policy4/energy_performance_preference"), syscall.EBUSY))
	require.Error(t, in.r.Flush(), "policy4's preference fails for now")
	assert.Equal(t, "powersave", tr.read(t, "policy2/scaling_governor"), "another policy's restores go on")
	assert.Equal(t, "balance_performance", tr.read(t, "policy2/energy_performance_preference"))
	assert.Equal(t, "2500000", tr.read(t, "policy4/scaling_max_freq"), "its own policy's lower Order waits")
	_, ok := in.j.Get(tr.path("policy4/scaling_max_freq"))
	assert.True(t, ok)
}
