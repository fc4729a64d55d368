package hostfiles

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/internal/proflabel/proflabeltest"
)

// seenLabels keeps the labels of the goroutine that ran each step, by step.
type seenLabels struct {
	mu   sync.Mutex
	seen map[string][]map[string]string
	errs []error
}

// note keeps the labels of the calling goroutine (named by a function on
// its stack) under step.
func (s *seenLabels) note(step, fn string) {
	got, err := proflabeltest.LabelsOf(fn)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string][]map[string]string{}
	}
	s.seen[step] = append(s.seen[step], got...)
	if err != nil {
		s.errs = append(s.errs, err)
	}
}

func (s *seenLabels) take() (map[string][]map[string]string, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, errs := s.seen, s.errs
	s.seen, s.errs = nil, nil
	return seen, errs
}

// labelSource is a fakeSource that notes its goroutine's labels when it
// plans.
type labelSource struct {
	*fakeSource
	seen *seenLabels
}

func (s labelSource) Plan() (Plan, error) {
	s.seen.note("plan", "(*passWork).plan")
	return s.fakeSource.Plan()
}

// labelFS notes its goroutine's labels when a pass writes a host file.
type labelFS struct {
	OS
	seen *seenLabels
}

func (f labelFS) WriteFile(path string, data []byte) error {
	f.seen.note("write", "(*passWork).apply")
	return f.OS.WriteFile(path, data)
}

// TestPassLabels: a CPU profile splits the host files' worker by what runs
// (internal/proflabel): its goroutine carries worker=host-files, and while
// a pass plans or writes for a Source, that Source and the step; between
// passes the worker's label alone. A Flush runs on its caller's goroutine
// and leaves its labels as they are.
func TestPassLabels(t *testing.T) {
	tr := newTree(t, map[string]string{"a": "x"})
	seen := &seenLabels{}
	src := labelSource{newSource("irq"), seen}
	src.before = func() error {
		seen.note("hooks", "(*Reconciler).pass")
		return nil
	}
	in := openInstance(t, labelFS{seen: seen}, tr, bootA, src)
	in.r.timing = Timing{Delay: time.Millisecond, MinInterval: time.Millisecond, Rescan: time.Hour, BackoffInitial: time.Millisecond, BackoffMax: time.Millisecond}
	src.set(map[string]string{tr.path("a"): "y"})
	in.r.Start()
	in.r.Kick()
	require.Eventually(t, func() bool { return tr.read(t, "a") == "y" }, 5*time.Second, time.Millisecond)
	worker := map[string]string{proflabel.KeyWorker: proflabel.HostFiles}
	require.Eventually(t, func() bool {
		got, err := proflabeltest.LabelsOf("(*Reconciler).run")
		return err == nil && assert.ObjectsAreEqual([]map[string]string{worker}, got)
	}, 5*time.Second, time.Millisecond, "between passes, the worker's label alone")

	got, errs := seen.take()
	require.Empty(t, errs)
	step := func(source, step string) map[string]string {
		m := map[string]string{proflabel.KeyWorker: proflabel.HostFiles, proflabel.KeyStep: step}
		if source != "" {
			m[proflabel.KeySource] = source
		}
		return m
	}
	assert.Equal(t, []map[string]string{step("irq", proflabel.StepPlan)}, got["plan"])
	assert.Equal(t, []map[string]string{step("irq", proflabel.StepWrite)}, got["write"])
	assert.Equal(t, []map[string]string{step("", proflabel.StepHooks)}, got["hooks"])

	src.set(map[string]string{tr.path("a"): "z"})
	require.NoError(t, in.r.Flush())
	got, errs = seen.take()
	require.Empty(t, errs)
	assert.Equal(t, map[string][]map[string]string{"plan": {{}}, "write": {{}}, "hooks": {{}}}, got,
		"a Flush on a goroutine without labels leaves it without")
}
