package handlerclock

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSpanTellsOnFromOffCPU times, on one locked thread, a phase that
// spins until the thread has run 3 ms (however long a loaded machine
// takes to give it them), one that sleeps in a system call
// (wall time, no CPU, a voluntary switch) and one that touches fresh pages
// (minor faults): what the diagnostic exists to tell apart.
func TestSpanTellsOnFromOffCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := NewRecorder("spin", "sleep", "fault")
	require.NoError(t, err)
	const pages = 64
	mem, err := unix.Mmap(-1, 0, pages*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(mem)

	s := r.Start()
	for start := threadCPU(); threadCPU()-start < int64(3*time.Millisecond); {
	}
	s.Mark(0)
	require.NoError(t, unix.Nanosleep(&unix.Timespec{Nsec: int64(5 * time.Millisecond)}, nil))
	s.Mark(1)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	s.End()

	sum := r.Summary(0)
	require.Equal(t, 1, sum.Calls, "threadChanged %d, incomplete %d", sum.ThreadChanged, sum.Incomplete)
	spin, sleep, total := sum.Phases[0], sum.Phases[1], sum.Phases[3]
	assert.GreaterOrEqual(t, spin.CPUMeanUs, 3000.0, "a spinning phase runs on its CPU")
	// Each mark reads the wall clock and then the thread's CPU clock, so
	// the two intervals start and end a fraction of a microsecond apart:
	// a spinning phase's CPU time may exceed its wall time by that much
	// (3,003.808 against 3,003.738 µs in one CI run), not by more.
	assert.GreaterOrEqual(t, spin.WallMeanUs, spin.CPUMeanUs-1.0)
	assert.GreaterOrEqual(t, sleep.WallMeanUs, 5000.0)
	assert.Less(t, sleep.CPUMeanUs, 1000.0, "a sleeping phase does not")
	assert.GreaterOrEqual(t, sleep.OffCPUMeanUs, 4000.0)
	assert.Equal(t, 1.0, sum.VoluntaryShare, "the sleep is a switch the thread asked for")
	assert.GreaterOrEqual(t, sum.MinorFaultsPerCall, float64(pages), "each fresh page faults once")
	assert.InDelta(t, spin.WallMeanUs+sleep.WallMeanUs+sum.Phases[2].WallMeanUs, total.WallMeanUs, 1e-6)
	assert.Positive(t, sum.MarkWallNs)
	assert.Positive(t, sum.MarkCPUNs)
}

// TestSpanNotRecorded: a call that returns before its last mark (a
// refusal) or marks out of order is counted, not recorded.
func TestSpanNotRecorded(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := NewRecorder("a", "b", "c")
	require.NoError(t, err)
	s := r.Start()
	s.Mark(0)
	s.End()
	s = r.Start()
	s.Mark(1)
	s.Mark(0)
	s.End()
	s = r.Start()
	s.Mark(0)
	s.Mark(1)
	s.Mark(2) // c is ended by End, not marked
	s.End()
	sum := r.Summary(0)
	assert.Equal(t, 0, sum.Calls)
	assert.Equal(t, uint64(3), sum.Incomplete)
	assert.Zero(t, sum.ThreadChanged)
}

// TestOffRecordsNothing: a nil Recorder's Span does nothing (the daemon
// without --handler-clocks).
func TestOffRecordsNothing(t *testing.T) {
	var r *Recorder
	s := r.Start()
	s.Mark(0)
	s.End()
	assert.Nil(t, s.r)
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		s := r.Start()
		s.Mark(0)
		s.End()
	}))
}

// TestOnAllocatesNothing: a call timed, marks and record included, does
// not allocate (it would add to the garbage the handler makes).
func TestOnAllocatesNothing(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := NewRecorder("a", "b", "c")
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		s := r.Start()
		defer s.End()
		s.Mark(0)
		s.Mark(1)
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 101, r.Summary(0).Calls)
}

// TestNewRecorderPhases: a handler of no phase, or more than MaxPhases,
// is an error that says what to give.
func TestNewRecorderPhases(t *testing.T) {
	_, err := NewRecorder()
	assert.ErrorContains(t, err, "0 phases; give 1 to 12")
	_, err = NewRecorder(make([]string, MaxPhases+1)...)
	assert.ErrorContains(t, err, "13 phases")
}
