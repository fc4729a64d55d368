package handlerclock

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// MaxPhases is the most phases a handler may be split into.
const MaxPhases = 12

// ringSize is how many calls a Recorder keeps: enough for a benchmark's
// measured rounds (1,000 to 3,000) read once at their end, and small
// (about 0.5 MiB, of no pointers, which the collector does not scan) so
// that turning the diagnostic on barely moves the heap it would measure.
const ringSize = 4096

// record is one call's figures as kept: per phase, the wall and thread
// CPU time since the call's entry at the phase's end (the last is the
// exit), in nanoseconds; and the thread's counters over the call.
type record struct {
	wall, cpu                                        [MaxPhases]uint32
	involuntary, voluntary, minorFaults, majorFaults uint32
}

// Recorder keeps the last calls of one handler, phase by phase. A nil
// *Recorder is the diagnostic off: Start gives a Span that records nothing.
// Its methods are safe for concurrent use.
type Recorder struct {
	phases []string
	epoch  time.Time
	// markCost is what one mark itself takes (wall and thread CPU), for
	// reading the phases' figures: each phase includes one.
	markCost [2]int64
	// threadChanged counts calls discarded because they ended on another
	// OS thread than they started on (their CPU clocks are two threads');
	// incomplete, calls that returned before their last mark (a refusal, a
	// repeated event): not the path being measured.
	threadChanged, incomplete atomic.Uint64

	mu   sync.Mutex
	seq  uint64 // calls recorded so far
	ring [ringSize]record
}

// NewRecorder makes a Recorder for a handler whose phases, in order, are
// phases: the handler marks the end of each but the last with Span.Mark,
// and Span.End ends the last.
func NewRecorder(phases ...string) (*Recorder, error) {
	if len(phases) == 0 || len(phases) > MaxPhases {
		return nil, fmt.Errorf("handlerclock: %d phases; give 1 to %d", len(phases), MaxPhases)
	}
	r := &Recorder{phases: slices.Clone(phases), epoch: time.Now()}
	r.markCost = calibrate(r.epoch)
	return r, nil
}

// calibrate is the median wall and thread CPU time between two marks that
// have nothing between them: what a mark adds to the phase it ends.
func calibrate(epoch time.Time) [2]int64 {
	const n = 65
	var wall, cpu [n]int64
	for i := range n {
		wall[i], cpu[i] = wallSince(epoch), threadCPU()
	}
	var dw, dc [n - 1]int64
	for i := range n - 1 {
		dw[i], dc[i] = wall[i+1]-wall[i], cpu[i+1]-cpu[i]
	}
	slices.Sort(dw[:])
	slices.Sort(dc[:])
	return [2]int64{dw[(n-1)/2], dc[(n-1)/2]}
}

// Phases are the phases' names, in order.
func (r *Recorder) Phases() []string { return slices.Clone(r.phases) }

// add keeps a call's record, over the oldest when the ring is full.
func (r *Recorder) add(rec record) {
	r.mu.Lock()
	r.ring[r.seq%ringSize] = rec
	r.seq++
	r.mu.Unlock()
}
