package proflabel_test

import (
	"context"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/internal/proflabel/proflabeltest"
)

// labelsHere are the labels of the calling goroutine (this test's
// function is on its stack).
func labelsHere(t *testing.T, fn string) map[string]string {
	t.Helper()
	got, err := proflabeltest.LabelsOf(fn)
	require.NoError(t, err)
	require.Len(t, got, 1, "one goroutine runs %s", fn)
	return got[0]
}

// waitGone waits up to a few seconds until no goroutine runs fn: a
// goroutine that has done its last step may still be on its way out.
func waitGone(t *testing.T, fn string) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, err := proflabeltest.LabelsOf(fn)
		return err == nil && len(got) == 0
	}, 5*time.Second, time.Millisecond, "goroutine %s still runs", fn)
}

// TestDoLabelsThenRestores: Do labels the goroutine while f runs and gives
// it back the labels of the context it was given; goroutines f starts
// inherit the label; With adds a key.
func TestDoLabelsThenRestores(t *testing.T) {
	outer := pprof.WithLabels(context.Background(), pprof.Labels("outer", "1"))
	pprof.SetGoroutineLabels(outer)
	defer pprof.SetGoroutineLabels(context.Background())
	set := proflabel.Worker(proflabel.HostFiles).With(proflabel.KeyStep, proflabel.StepPlan)
	inherited := make(chan map[string]string)
	set.Do(outer, func() {
		assert.Equal(t, map[string]string{"worker": "host-files", "step": "plan"}, labelsHere(t, "TestDoLabelsThenRestores"))
		done := make(chan struct{})
		go func() {
			defer close(done)
			inherited <- labelsHere(t, "TestDoLabelsThenRestores.func1.1")
		}()
		assert.Equal(t, map[string]string{"worker": "host-files", "step": "plan"}, <-inherited, "a goroutine started inside")
		// The goroutine's stack names this test too (func1.1): it must be
		// gone before the next look, or that look finds two goroutines.
		<-done
		waitGone(t, "TestDoLabelsThenRestores.func1.1")
	})
	assert.Equal(t, map[string]string{"outer": "1"}, labelsHere(t, "TestDoLabelsThenRestores"), "the caller's labels, back")
	assert.Equal(t, "plan", func() string { v, _ := pprof.Label(set.Context(), proflabel.KeyStep); return v }())
}

// TestGoLabelsTheWorker: Go's goroutine carries worker=name, not the
// labels of the goroutine that started it; NRI's set is nri=event.
func TestGoLabelsTheWorker(t *testing.T) {
	got := make(chan map[string]string)
	proflabel.NRI("RunPodSandbox").Do(context.Background(), func() {
		proflabel.Go(proflabel.SandboxPinner, func() { got <- labelsHere(t, "TestGoLabelsTheWorker.func1.1") })
	})
	assert.Equal(t, map[string]string{"worker": "sandbox-pinner"}, <-got)
	var zero proflabel.Set
	zero.Do(context.Background(), func() {
		assert.Empty(t, labelsHere(t, "TestGoLabelsTheWorker.func2"), "the zero Set labels nothing")
	})
}
