package power

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

const boot = "6b1e0f7a-3c0d-4f9e-8d21-0c5a9e7b2f11"

// classes is a latency class, a power-saving one, and one that sets
// nothing.
const classes = `
power:
  classes:
    low-latency:
      resumeLatencyUS: n/a
      disabledIdleStates: [C1E, C6]
      governor: performance
      minFreqKHz: max
      maxFreqKHz: max
      uncoreMinFreqKHz: 2400000
      uncoreMaxFreqKHz: 2400000
    saver:
      resumeLatencyUS: 100
      energyPerformancePreference: power
      maxFreqKHz: base
      uncoreMaxFreqKHz: 1800000
    as-booted: {}
`

// turboClass is a latency class written out in full: the performance
// governor and, explicitly, the performance preference.
const turboClass = "\n    turbo: {governor: performance, energyPerformancePreference: performance}\n"

func loadClasses(t *testing.T, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(strings.NewReader(classes+extra), "classes.yaml")
	require.NoError(t, err)
	return cfg
}

// node is a fixture tree with its power files, and a process (journal,
// reconciler, source) changing them.
type node struct {
	root  string
	topo  *sysfs.Topology
	state string
	// kernel is the node's cpufreq driver as the processes see it.
	kernel *pstate
}

func newNode(t *testing.T, shape string) *node {
	t.Helper()
	return nodeAt(t, fixture.Root(t, shape))
}

// smallXeon is the 2-socket Xeon's power management on 2 cores a socket
// (CPUs 0-7, interleaved: even CPUs on package 0), for tests that make
// many trees.
func smallXeon(t *testing.T) *node {
	t.Helper()
	dir, err := fixture.SpecDir()
	require.NoError(t, err)
	spec, err := fixture.LoadSpec(filepath.Join(dir, "xeon-2s-interleaved.yaml"))
	require.NoError(t, err)
	spec.CoresPerSocket, spec.CoreIDs, spec.IsolatedFile, spec.Cmdline, spec.Devices = 2, "", "", "", nil
	root := shmDir(t)
	require.NoError(t, spec.Write(root))
	return nodeAt(t, root)
}

// shmDir is a temporary directory on tmpfs where there is one: trees are
// many small files, and the journal is fsynced at every pass.
func shmDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "nri-cpupool-power-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func nodeAt(t *testing.T, root string) *node {
	t.Helper()
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	return &node{root: root, topo: topo, state: filepath.Join(shmDir(t), "state.json"), kernel: newPstate(hostfiles.OS{})}
}

// pstate is intel_pstate (amd-pstate alike) as its files show it: under
// the performance governor the preference reads performance and any other
// preference is refused with EBUSY; when the governor leaves performance
// the driver puts back the preference the policy had before. It wraps the
// host's files, and its memory is the kernel's: it outlives the processes
// that write through it.
type pstate struct {
	hostfiles.FS
	mu    sync.Mutex
	saved map[string]string // policy directory → preference before performance
}

func newPstate(fsys hostfiles.FS) *pstate {
	return &pstate{FS: fsys, saved: map[string]string{}}
}

func (k *pstate) WriteFile(path string, data []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	dir := filepath.Dir(path)
	gov := filepath.Join(dir, "scaling_governor")
	epp := filepath.Join(dir, "energy_performance_preference")
	readFile := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	switch filepath.Base(path) {
	case "energy_performance_preference":
		if readFile(gov) == "performance" && strings.TrimSpace(string(data)) != "performance" {
			return &os.PathError{Op: "write", Path: path, Err: syscall.EBUSY}
		}
	case "scaling_governor":
		before := readFile(gov)
		err := k.FS.WriteFile(path, data)
		// What the kernel did, whatever the caller was told.
		switch after := readFile(gov); {
		case before != "performance" && after == "performance":
			if cur, err := os.ReadFile(epp); err == nil {
				k.saved[dir] = strings.TrimSpace(string(cur))
				if err := os.WriteFile(epp, []byte("performance\n"), 0o644); err != nil {
					panic(err)
				}
			}
		case before == "performance" && after != "performance":
			if saved, ok := k.saved[dir]; ok {
				if err := os.WriteFile(epp, []byte(saved+"\n"), 0o644); err != nil {
					panic(err)
				}
			}
		}
		return err
	}
	return k.FS.WriteFile(path, data)
}

// cpu is a file of a CPU's directory (through the cpufreq link).
func (n *node) cpu(cpu int, rel string) string {
	return filepath.Join(n.root, "sys/devices/system/cpu", fmt.Sprintf("cpu%d", cpu), rel)
}

func (n *node) read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.TrimSpace(string(data))
}

// snapshot is every regular file below sys/devices/system/cpu.
func (n *node) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	dir := filepath.Join(n.root, "sys/devices/system/cpu")
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		out[strings.TrimPrefix(path, dir+"/")] = n.read(t, path)
		return nil
	}))
	return out
}

// changed lists the files whose content differs from before.
func changed(before, after map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range after {
		if before[k] != v {
			out[k] = before[k] + " → " + v
		}
	}
	return out
}

// wants is the owner's desired state: CPU → class.
type wants struct {
	mu sync.Mutex
	m  map[int]string
}

func (w *wants) set(m map[int]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m = maps.Clone(m)
}

func (w *wants) get() map[int]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.m)
}

type process struct {
	src  *Source
	rec  *hostfiles.Reconciler
	want *wants
	log  *logtest.Hook
}

func (n *node) start(t *testing.T, cfg *config.Config, fsys hostfiles.FS) *process {
	t.Helper()
	j, _, err := hostfiles.OpenJournal(fsys, hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	w := &wants{}
	src := NewSource(NewNode(n.root, n.topo), cfg.Power.Classes, w.get, j, log)
	r := hostfiles.NewReconciler(fsys, j, log, hostfiles.DefaultTiming, src)
	t.Cleanup(r.Close)
	return &process{src: src, rec: r, want: w, log: hook}
}

// pass makes the passes a change takes: a second one plans what the
// first left for later (a preference under the plugin's own performance
// governor), and changes nothing when nothing was left.
func (p *process) pass(t *testing.T, want map[int]string) {
	t.Helper()
	p.want.set(want)
	require.NoError(t, p.rec.Flush())
	require.NoError(t, p.rec.Flush())
}

func (p *process) warnings() []string {
	var out []string
	for _, e := range p.log.AllEntries() {
		if e.Level == logrus.WarnLevel {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestClassesAppliedAndRestoredExactly: on the 2-socket Xeon (CPU 2 on
// package 0, CPU 3 on package 1), two CPUs get the latency class and one
// the saver class: exactly their files change, the shared dies' uncore
// takes the highest value of their classes. Classes then move and end:
// every file that no class wants is back to its exact original, and the
// journal is empty.
func TestClassesAppliedAndRestoredExactly(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	cfg := loadClasses(t, "")
	orig := n.snapshot(t)
	p := n.start(t, cfg, n.kernel)

	p.pass(t, map[int]string{2: "low-latency", 3: "low-latency", 4: "saver", 6: "as-booted"})
	assert.Equal(t, map[string]string{
		"cpu2/power/pm_qos_resume_latency_us": "0 → n/a",
		"cpu2/cpuidle/state2/disable":         "0 → 1",
		"cpu2/cpuidle/state3/disable":         "0 → 1",
		"cpufreq/policy2/scaling_governor":    "powersave → performance",
		"cpufreq/policy2/scaling_min_freq":    "1000000 → 3900000",
		// The driver's, under the performance governor.
		"cpufreq/policy2/energy_performance_preference": "balance_performance → performance",
		"cpufreq/policy3/energy_performance_preference": "balance_performance → performance",
		"cpu3/power/pm_qos_resume_latency_us":           "0 → n/a",
		"cpu3/cpuidle/state2/disable":                   "0 → 1",
		"cpu3/cpuidle/state3/disable":                   "0 → 1",
		"cpufreq/policy3/scaling_governor":              "powersave → performance",
		"cpufreq/policy3/scaling_min_freq":              "1000000 → 3900000",
		"cpu4/power/pm_qos_resume_latency_us":           "0 → 100",
		"cpufreq/policy4/energy_performance_preference": "balance_performance → power",
		"cpufreq/policy4/scaling_max_freq":              "3900000 → 2500000",
		// Package 0 has CPU 2 (2400000) and CPU 4 (max 1800000): the
		// highest wins; package 1 has CPU 3 only.
		"intel_uncore_frequency/package_00_die_00/min_freq_khz": "1200000 → 2400000",
		"intel_uncore_frequency/package_01_die_00/min_freq_khz": "1200000 → 2400000",
	}, changed(orig, n.snapshot(t)), "scaling_max_freq of the latency CPUs is already at max: left alone")
	assert.Equal(t, "n/a", n.read(t, n.cpu(2, "power/pm_qos_resume_latency_us")), "through the CPU's own path")
	assert.Equal(t, "performance", n.read(t, n.cpu(2, "cpufreq/scaling_governor")), "through the cpufreq link")
	rep := p.src.Report()
	assert.Equal(t, "2-3", rep.CPUs["low-latency"].String())
	assert.Equal(t, "6", rep.CPUs["as-booted"].String())
	assert.Empty(t, rep.Unsupported)

	// CPU 2 leaves for the saver class, CPU 3 is released, CPU 4 too.
	p.pass(t, map[int]string{2: "saver"})
	assert.Equal(t, map[string]string{
		"cpu2/power/pm_qos_resume_latency_us":                   "0 → 100",
		"cpufreq/policy2/energy_performance_preference":         "balance_performance → power",
		"cpufreq/policy2/scaling_max_freq":                      "3900000 → 2500000",
		"intel_uncore_frequency/package_00_die_00/max_freq_khz": "2400000 → 1800000",
	}, changed(orig, n.snapshot(t)), "everything else exactly as it was")

	p.pass(t, nil)
	assert.Empty(t, changed(orig, n.snapshot(t)))
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	assert.Empty(t, records)
}

// TestRestoredAfterRestart: a process applies classes and dies without a
// word; the next one, whose owner wants nothing, restores every file from
// the journal, and one that wants the same keeps them.
func TestRestoredAfterRestart(t *testing.T) {
	for _, again := range []bool{false, true} {
		t.Run(fmt.Sprintf("wanted again %v", again), func(t *testing.T) {
			n := newNode(t, "xeon-2s-interleaved")
			cfg := loadClasses(t, "")
			orig := n.snapshot(t)
			first := n.start(t, cfg, n.kernel)
			want := map[int]string{2: "low-latency", 5: "saver"}
			first.pass(t, want)
			applied := n.snapshot(t)
			first.rec.Close()

			next := n.start(t, cfg, n.kernel)
			if again {
				next.pass(t, want)
				assert.Equal(t, applied, n.snapshot(t))
			}
			next.pass(t, nil)
			assert.Empty(t, changed(orig, n.snapshot(t)))
		})
	}
}

// dyingFS is the host's file system until the process "dies" at its k-th
// mutating operation (a host file write or a journal replace), just
// before or just after it; from then on nothing it does reaches the disk.
type dyingFS struct {
	hostfiles.FS
	at, n       int
	after, dead bool
}

var errDied = errors.New("the process died")

func (d *dyingFS) mutate(do func() error) error {
	if d.dead {
		return errDied
	}
	d.n++
	if d.n == d.at && !d.after {
		d.dead = true
		return errDied
	}
	err := do()
	if d.n == d.at {
		d.dead = true
		return errDied
	}
	return err
}

func (d *dyingFS) WriteFile(path string, data []byte) error {
	return d.mutate(func() error { return d.FS.WriteFile(path, data) })
}

func (d *dyingFS) ReplaceFile(path string, data []byte) error {
	return d.mutate(func() error { return d.FS.ReplaceFile(path, data) })
}

// TestKillBetweenWriteAndJournal kills the process at every mutating step
// of a life of classes (applied, moved, released), before and after the
// step, whether it is a write of a power file or of the journal. The next
// process, wanting nothing, puts every file back exactly; wanting what
// the dead one wanted, it writes values derived from the originals.
func TestKillBetweenWriteAndJournal(t *testing.T) {
	life := []map[int]string{{2: "low-latency", 4: "saver"}, {2: "saver", 3: "low-latency"}, nil}
	run := func(t *testing.T, n *node, fsys *dyingFS) int {
		p := n.start(t, loadClasses(t, ""), fsys)
		for i, want := range life {
			p.want.set(want)
			for range 2 { // as process.pass
				_ = p.rec.Flush() // a dying process's errors reach no one
			}
			if fsys.dead {
				return i
			}
		}
		return len(life)
	}
	// A clean life says what each step's files are: a function of the
	// originals and the step's want only.
	n := smallXeon(t)
	clean := &dyingFS{FS: n.kernel}
	orig := n.snapshot(t)
	p := n.start(t, loadClasses(t, ""), clean)
	var expect []map[string]string
	for _, want := range life {
		p.pass(t, want)
		expect = append(expect, changed(orig, n.snapshot(t)))
	}
	assert.Empty(t, expect[len(life)-1])
	steps := clean.n
	require.Greater(t, steps, 10, "a life of many writes")

	for k := 1; k <= steps; k++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("step %d after %v", k, after), func(t *testing.T) {
				n := smallXeon(t)
				orig := n.snapshot(t)
				fsys := &dyingFS{FS: n.kernel, at: k, after: after}
				died := run(t, n, fsys)
				require.True(t, fsys.dead)

				next := n.start(t, loadClasses(t, ""), n.kernel)
				if died < len(life) {
					// The step the process died in, from the originals.
					next.pass(t, life[died])
					assert.Equal(t, expect[died], changed(orig, n.snapshot(t)))
				}
				next.pass(t, nil)
				assert.Empty(t, changed(orig, n.snapshot(t)), "every file back to its original")
			})
		}
	}
}

// TestPreferenceOriginalNotReadUnderOwnPerformanceGovernor: the docs'
// example, on intel_pstate. An exclusive CPU idles in a class with a
// preference (saver), a container's class sets the performance governor
// (low-latency), the container ends. The preference's original is never
// journaled while the plugin's own performance governor is in force (the
// file shows performance then): the idle class's preference is planned
// once the governor is back, and when no class wants anything the node's
// balance_performance is back, not performance (issue 30, defect 2).
func TestPreferenceOriginalNotReadUnderOwnPerformanceGovernor(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	orig := n.snapshot(t)
	require.Equal(t, "balance_performance", orig["cpufreq/policy2/energy_performance_preference"])
	p := n.start(t, loadClasses(t, ""), n.kernel)
	epp := n.cpu(2, "cpufreq/energy_performance_preference")

	p.pass(t, map[int]string{2: "saver"})
	assert.Equal(t, "power", n.read(t, epp))
	p.pass(t, map[int]string{2: "low-latency"})
	assert.Equal(t, "performance", n.read(t, n.cpu(2, "cpufreq/scaling_governor")))
	assert.Equal(t, "performance", n.read(t, epp), "the driver's, under the performance governor")

	// The container ends: its CPU idles in the saver class again.
	p.want.set(map[int]string{2: "saver"})
	require.NoError(t, p.rec.Flush())
	records, _, _, err := hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	for path, rec := range records {
		if filepath.Base(path) == "energy_performance_preference" {
			assert.Equal(t, "balance_performance", rec.Original, "%s: the node's own preference", path)
		}
	}
	require.NoError(t, p.rec.Flush())
	assert.Equal(t, "powersave", n.read(t, n.cpu(2, "cpufreq/scaling_governor")))
	assert.Equal(t, "power", n.read(t, epp), "the idle class's preference, once the governor is back")
	records, _, _, err = hostfiles.ReadJournal(hostfiles.JournalPath(n.state), boot)
	require.NoError(t, err)
	resolved, err := filepath.EvalSymlinks(epp)
	require.NoError(t, err)
	assert.Equal(t, "balance_performance", records[resolved].Original)
	assert.Empty(t, p.rec.Status().Failures, "no preference written under the performance governor")

	p.pass(t, nil)
	assert.Empty(t, changed(orig, n.snapshot(t)), "every file back to its original")
}

// uncoreWatch checks, after every write of an uncore bound, that the die's
// minimum is not above its maximum: the driver writes either bound as it
// comes.
type uncoreWatch struct {
	hostfiles.FS
	crossed []string
}

func (u *uncoreWatch) WriteFile(path string, data []byte) error {
	err := u.FS.WriteFile(path, data)
	if dir := filepath.Dir(path); strings.Contains(dir, "intel_uncore_frequency") {
		lo, _ := readKHz(filepath.Join(dir, "min_freq_khz"))
		hi, _ := readKHz(filepath.Join(dir, "max_freq_khz"))
		if lo > hi {
			u.crossed = append(u.crossed, fmt.Sprintf("%s = %s: min %d above max %d", path, strings.TrimSpace(string(data)), lo, hi))
		}
	}
	return err
}

// TestUncoreMinNeverAboveMax: a die has one uncore range. Two classes on
// one die, one setting only the minimum and the other only a lower
// maximum, or a class and the die's own other bound, never leave the
// minimum above the maximum: the floor wins and the maximum is raised to
// it. Going down, the minimum is written before the maximum, so no write
// in between crosses them. Everything is restored exactly.
func TestUncoreMinNeverAboveMax(t *testing.T) {
	const die0 = "intel_uncore_frequency/package_00_die_00/"
	extra := `
    floor: {uncoreMinFreqKHz: 2000000}
    cap: {uncoreMaxFreqKHz: 1600000}
    low: {uncoreMinFreqKHz: 1300000, uncoreMaxFreqKHz: 1500000}
`
	for _, tc := range []struct {
		name string
		// node sets the die's bounds as the node has them.
		node             map[string]string
		steps            []map[int]string
		wantMin, wantMax string
	}{
		// CPUs 2 and 4 are on package 0.
		{name: "a floor and a lower cap", steps: []map[int]string{{2: "floor", 4: "cap"}}, wantMin: "2000000", wantMax: "2000000"},
		{name: "a floor above the node's maximum", node: map[string]string{"max_freq_khz": "1800000"},
			steps: []map[int]string{{2: "floor"}}, wantMin: "2000000", wantMax: "2000000"},
		{name: "a cap below the node's minimum", node: map[string]string{"min_freq_khz": "2000000"},
			steps: []map[int]string{{2: "cap"}}, wantMin: "2000000", wantMax: "2000000"},
		{name: "both bounds down below the minimum", steps: []map[int]string{{2: "low-latency"}, {2: "low"}},
			wantMin: "1300000", wantMax: "1500000"},
		{name: "the node's minimum back under a cap", node: map[string]string{"min_freq_khz": "2000000"},
			steps: []map[int]string{{2: "low"}, {2: "cap"}}, wantMin: "2000000", wantMax: "2000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, "xeon-2s-interleaved")
			for file, v := range tc.node {
				require.NoError(t, os.WriteFile(filepath.Join(n.root, "sys/devices/system/cpu", die0, file), []byte(v+"\n"), 0o644))
			}
			orig := n.snapshot(t)
			watch := &uncoreWatch{FS: n.kernel}
			p := n.start(t, loadClasses(t, extra), watch)
			for _, want := range tc.steps {
				p.pass(t, want)
			}
			now := n.snapshot(t)
			assert.Equal(t, tc.wantMin, now[die0+"min_freq_khz"])
			assert.Equal(t, tc.wantMax, now[die0+"max_freq_khz"])
			p.pass(t, nil)
			assert.Empty(t, watch.crossed)
			assert.Empty(t, changed(orig, n.snapshot(t)), "every file back to its original")
		})
	}
}

// kernelForms shows accepted values the way drivers do: acpi-cpufreq
// resolves a frequency limit to its table (here, down to a multiple of
// 300 MHz) and intel_pstate shows preference 128 by its name.
type kernelForms struct {
	hostfiles.FS
	writes map[string]int // by file name
}

func (k *kernelForms) WriteFile(path string, data []byte) error {
	value := strings.TrimSpace(string(data))
	switch filepath.Base(path) {
	case "scaling_max_freq", "scaling_min_freq":
		khz, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return &os.PathError{Op: "write", Path: path, Err: syscall.EINVAL}
		}
		value = strconv.FormatInt(khz/300000*300000, 10)
	case "energy_performance_preference":
		if value == "128" {
			value = "balance_performance"
		}
	}
	k.writes[filepath.Base(path)]++
	return k.FS.WriteFile(path, []byte(value+"\n"))
}

// TestKernelFormsAreSatisfied: a value the driver shows in its own form
// (a frequency resolved to the driver's table, a numeric preference shown
// by name) is written once, not again at every rescan; a file someone
// else changes is written again; everything is restored exactly.
func TestKernelFormsAreSatisfied(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	require.NoError(t, os.WriteFile(n.cpu(2, "cpufreq/energy_performance_preference"), []byte("balance_power\n"), 0o644))
	orig := n.snapshot(t)
	fsys := &kernelForms{FS: n.kernel, writes: map[string]int{}}
	p := n.start(t, loadClasses(t, `
    tabled: {maxFreqKHz: 2500000, energyPerformancePreference: "128"}
`), fsys)
	want := map[int]string{2: "tabled"}
	p.pass(t, want)
	assert.Equal(t, "2400000", n.read(t, n.cpu(2, "cpufreq/scaling_max_freq")))
	assert.Equal(t, "balance_performance", n.read(t, n.cpu(2, "cpufreq/energy_performance_preference")))
	for range 3 { // rescans
		p.pass(t, want)
	}
	assert.Equal(t, map[string]int{"scaling_max_freq": 1, "energy_performance_preference": 1}, fsys.writes, "written once")

	// Someone else changes the limit: it is written again.
	require.NoError(t, os.WriteFile(n.cpu(2, "cpufreq/scaling_max_freq"), []byte("3900000\n"), 0o644))
	p.pass(t, want)
	assert.Equal(t, "2400000", n.read(t, n.cpu(2, "cpufreq/scaling_max_freq")))
	assert.Equal(t, 2, fsys.writes["scaling_max_freq"])

	p.pass(t, nil)
	assert.Empty(t, changed(orig, n.snapshot(t)), "every file back to its original")
}

// TestUnsupportedOnAVM: the VM we run on has the PM QoS file and nothing
// else. Check says so per class and setting for the node; a pass applies
// what exists and warns once about the rest, whatever the number of CPUs
// and passes.
func TestUnsupportedOnAVM(t *testing.T) {
	n := newNode(t, "vm-2cpu")
	cfg := loadClasses(t, "")
	orig := n.snapshot(t)
	problems := NewNode(n.root, n.topo).Check(cfg)
	var keys []string
	for _, p := range problems {
		assert.True(t, p.Warning)
		keys = append(keys, p.Key)
	}
	assert.Equal(t, []string{
		"power.classes.low-latency.disabledIdleStates", "power.classes.low-latency.governor",
		"power.classes.low-latency.maxFreqKHz", "power.classes.low-latency.minFreqKHz",
		"power.classes.low-latency.uncoreMaxFreqKHz", "power.classes.low-latency.uncoreMinFreqKHz",
		"power.classes.saver.energyPerformancePreference", "power.classes.saver.maxFreqKHz",
		"power.classes.saver.uncoreMaxFreqKHz",
	}, keys, "resumeLatencyUS exists: not reported")
	assert.Contains(t, problems.Error(), "power.classes.low-latency.governor: no cpufreq (no frequency scaling driver: a VM, or none loaded) on CPUs 0-1 of this node; containers of the class start without it (power.unsupported: warn)")
	assert.Nil(t, NewNode(n.root, n.topo).Refusals(cfg), "warn: nothing refused")

	refuse := loadClasses(t, "  unsupported: refuse\n")
	assert.Equal(t, map[string]string{
		"low-latency": "disabledIdleStates: no cpuidle (no idle driver: cpuidle/current_driver is none or the CPU has no cpuidle directory) on CPUs 0-1 of this node",
		"saver":       "energyPerformancePreference: no cpufreq (no frequency scaling driver: a VM, or none loaded) on CPUs 0-1 of this node",
	}, NewNode(n.root, n.topo).Refusals(refuse), "as-booted lacks nothing")

	p := n.start(t, cfg, n.kernel)
	p.pass(t, map[int]string{0: "saver", 1: "low-latency"})
	p.pass(t, map[int]string{0: "saver", 1: "low-latency"})
	assert.Equal(t, map[string]string{
		"cpu0/power/pm_qos_resume_latency_us": "0 → 100",
		"cpu1/power/pm_qos_resume_latency_us": "0 → n/a",
	}, changed(orig, n.snapshot(t)))
	warned := p.warnings()
	assert.Len(t, warned, 9, "one line per class, setting and reason, over two passes:\n%s", strings.Join(warned, "\n"))
	assert.Contains(t, warned, "power: class low-latency: governor: no cpufreq (no frequency scaling driver: a VM, or none loaded) (CPUs 1); the CPUs run without it")
	assert.Len(t, p.src.Report().Unsupported, 9)
	p.pass(t, nil)
	assert.Empty(t, changed(orig, n.snapshot(t)))
}

// TestWhatTheCPUDoesNotOffer: an idle state, governor or preference the
// CPU lacks is left out and reported; the rest of the class applies.
// Under the performance governor the driver fixes the preference, so a
// class that sets a preference only goes without it.
func TestWhatTheCPUDoesNotOffer(t *testing.T) {
	n := newNode(t, "epyc-1s-nps4")
	cfg := loadClasses(t, `
    odd: {disabledIdleStates: [C2, C6], governor: schedutil, energyPerformancePreference: balance_power}
`)
	require.NoError(t, os.WriteFile(n.cpu(1, "cpufreq/scaling_governor"), []byte("performance\n"), 0o644))
	orig := n.snapshot(t)
	p := n.start(t, cfg, n.kernel)
	p.pass(t, map[int]string{0: "odd", 1: "odd"})
	assert.Equal(t, map[string]string{
		"cpu0/cpuidle/state2/disable":                   "0 → 1",
		"cpu1/cpuidle/state2/disable":                   "0 → 1",
		"cpufreq/policy0/energy_performance_preference": "balance_performance → balance_power",
	}, changed(orig, n.snapshot(t)))
	var notes []string
	for _, note := range p.src.Report().Unsupported {
		notes = append(notes, note.String())
	}
	assert.Equal(t, []string{
		`class odd: disabledIdleStates: no idle state "C6" (the CPU has C1, C2, POLL) (CPUs 0-1)`,
		"class odd: energyPerformancePreference: the governor is performance, under which the driver fixes the preference at performance (CPUs 1)",
		"class odd: governor: governor schedutil is not offered (scaling_available_governors: performance powersave) (CPUs 0-1)",
	}, notes)
}

// performanceBootedNode is the Xeon node booted with the performance
// governor on CPU 2's policy (tuned's latency-performance profile,
// cpupower frequency-set -g performance at boot): intel_pstate shows the
// performance preference and remembers the node's own,
// balance_performance. policy is the policy's directory.
func performanceBootedNode(t *testing.T) (n *node, policy string) {
	t.Helper()
	n = newNode(t, "xeon-2s-interleaved")
	policy, err := filepath.EvalSymlinks(n.cpu(2, "cpufreq"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(policy, "scaling_governor"), []byte("performance\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(policy, "energy_performance_preference"), []byte("performance\n"), 0o644))
	n.kernel.saved[policy] = "balance_performance"
	return n, policy
}

// turboOnCPU2 is the Xeon node as booted (orig: its files then) and a
// process that has given CPU 2 turboClass: the performance governor is in
// force, and the preference the class's.
func turboOnCPU2(t *testing.T) (n *node, orig map[string]string, p *process) {
	t.Helper()
	n = newNode(t, "xeon-2s-interleaved")
	orig = n.snapshot(t)
	p = n.start(t, loadClasses(t, turboClass), n.kernel)
	p.pass(t, map[int]string{2: "turbo"})
	require.Equal(t, "performance", n.read(t, n.cpu(2, "cpufreq/scaling_governor")))
	return n, orig, p
}

// sharePolicy makes CPU 4 share CPU 2's cpufreq policy, as acpi-cpufreq
// does on some machines: its link points at policy2, whose related_cpus
// list both.
func sharePolicy(t *testing.T, n *node) {
	t.Helper()
	link := n.cpu(4, "cpufreq")
	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink("../cpufreq/policy2", link))
	require.NoError(t, os.WriteFile(n.cpu(2, "cpufreq/related_cpus"), []byte("2 4\n"), 0o644))
}

// TestSharedPolicy: CPUs of one cpufreq policy (acpi-cpufreq on some
// machines) share its files: the first CPU's class sets them, and a CPU
// of another class that wants other values is told.
func TestSharedPolicy(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	sharePolicy(t, n)
	cfg := loadClasses(t, "")
	orig := n.snapshot(t)
	p := n.start(t, cfg, n.kernel)
	p.pass(t, map[int]string{2: "saver", 4: "low-latency"})
	ch := changed(orig, n.snapshot(t))
	assert.Equal(t, "3900000 → 2500000", ch["cpufreq/policy2/scaling_max_freq"], "CPU 2's class")
	assert.NotContains(t, ch, "cpufreq/policy2/scaling_governor", "nothing of CPU 4's class")
	assert.NotContains(t, ch, "cpufreq/policy2/scaling_min_freq")
	assert.Equal(t, "0 → n/a", ch["cpu4/power/pm_qos_resume_latency_us"], "CPU 4's own files")
	var notes []string
	for _, note := range p.src.Report().Unsupported {
		notes = append(notes, note.Setting+": "+note.Reason)
	}
	shared := ": its cpufreq policy (policy2) is shared with CPU 2, whose class saver decides it"
	assert.Equal(t, []string{"governor" + shared, "maxFreqKHz" + shared, "minFreqKHz" + shared}, notes)
}

// TestSharedPolicyBelongsToItsFirstCPU: a shared cpufreq policy is its
// first CPU's, also when that CPU's class sets no frequency, when it has
// no class at all, or a class the config no longer has: a later CPU's
// class (a tenant's choice) never sets it (issue 30, defect 6).
func TestSharedPolicyBelongsToItsFirstCPU(t *testing.T) {
	for name, want := range map[string]map[int]string{
		"a class that sets no frequency": {2: "as-booted", 4: "low-latency"},
		"no class":                       {4: "low-latency"},
		"a class of another config":      {2: "gone", 4: "low-latency"},
	} {
		t.Run(name, func(t *testing.T) {
			n := newNode(t, "xeon-2s-interleaved")
			sharePolicy(t, n)
			orig := n.snapshot(t)
			p := n.start(t, loadClasses(t, ""), n.kernel)
			p.pass(t, want)
			ch := changed(orig, n.snapshot(t))
			for path := range ch {
				assert.False(t, strings.HasPrefix(path, "cpufreq/policy2/"), "CPU 2's policy changed: %s %s", path, ch[path])
			}
			assert.Equal(t, "0 → n/a", ch["cpu4/power/pm_qos_resume_latency_us"], "CPU 4's own files")
			var notes []string
			for _, note := range p.src.Report().Unsupported {
				if note.Class == "low-latency" {
					notes = append(notes, note.Setting)
					assert.Contains(t, note.Reason, "its cpufreq policy (policy2) is shared with CPU 2")
				}
			}
			assert.Equal(t, []string{"governor", "maxFreqKHz", "minFreqKHz"}, notes)
		})
	}
}

// TestRefusedSettingsAreReported: a value the driver rejects (EINVAL) is
// logged once with a hint, and not retried; the CPU's other settings
// apply.
func TestRefusedSettingsAreReported(t *testing.T) {
	n := newNode(t, "xeon-2s-interleaved")
	cfg := loadClasses(t, "")
	fsys := &refusingFS{refuse: n.cpu(2, "cpufreq/scaling_min_freq")}
	p := n.start(t, cfg, fsys)
	p.pass(t, map[int]string{2: "low-latency"})
	p.pass(t, map[int]string{2: "low-latency"})
	assert.Equal(t, "performance", n.read(t, n.cpu(2, "cpufreq/scaling_governor")))
	st := p.rec.Status()
	require.Len(t, st.Failures, 1)
	assert.Equal(t, Owner, st.Failures[0].Owner)
	assert.Equal(t, "the driver rejects this value for this CPU", st.Failures[0].Hint)
	assert.Equal(t, 1, fsys.writes, "not retried")
}

type refusingFS struct {
	hostfiles.OS
	refuse string
	writes int
}

func (r *refusingFS) WriteFile(path string, data []byte) error {
	if resolved, _ := filepath.EvalSymlinks(filepath.Dir(r.refuse)); filepath.Join(resolved, filepath.Base(r.refuse)) == path {
		r.writes++
		return &os.PathError{Op: "write", Path: path, Err: syscall.EINVAL}
	}
	return r.OS.WriteFile(path, data)
}

// TestNotesOneSetPerNote: a note of many CPUs (a pass adds one per CPU of
// a class the node cannot give) makes its CPUs' set once, not a set per
// CPU added (issue 45: the power Source's allocations per pass grew with
// the CPUs in classes); and the notes are what they were: merged by
// class, setting and reason, sorted by class and setting.
func TestNotesOneSetPerNote(t *testing.T) {
	const cpus = 256
	fill := func() []Note {
		ns := newNotes()
		for cpu := 0; cpu < cpus; cpu++ {
			ns.add("fast", Governor, "not offered", cpu)
			if cpu%2 == 0 {
				ns.add("fast", EPP, "no preference", cpu)
			}
		}
		ns.add("batch", MaxFreq, "no cpuinfo_max_freq", 7)
		return ns.list()
	}
	allocs := testing.AllocsPerRun(20, func() { fill() })
	t.Logf("allocations for three notes of %d CPUs: %.0f", cpus, allocs)
	// Three sets of up to 256 CPUs and the lists behind them: tens of
	// objects. A union per CPU made thousands.
	assert.LessOrEqual(t, allocs, 100.0, "allocations for three notes of %d CPUs", cpus)

	var all, evens []int
	for cpu := 0; cpu < cpus; cpu++ {
		all = append(all, cpu)
		if cpu%2 == 0 {
			evens = append(evens, cpu)
		}
	}
	assert.Equal(t, []Note{
		{Class: "batch", Setting: MaxFreq, Reason: "no cpuinfo_max_freq", CPUs: cpuset.New(7)},
		{Class: "fast", Setting: EPP, Reason: "no preference", CPUs: cpuset.New(evens...)},
		{Class: "fast", Setting: Governor, Reason: "not offered", CPUs: cpuset.New(all...)},
	}, fill())
}
