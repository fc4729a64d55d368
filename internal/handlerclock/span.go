package handlerclock

import (
	"math"

	"golang.org/x/sys/unix"
)

// Span is one call being timed. It lives on the handler's stack: Start,
// Mark and End allocate nothing.
type Span struct {
	r       *Recorder
	n       int // marks so far
	tid     int
	wall0   int64
	cpu0    int64
	before  threadCounters
	wall    [MaxPhases]uint32
	cpu     [MaxPhases]uint32
	invalid bool // a mark out of order
}

// Start begins timing a call: the thread it runs on, its counters and
// both clocks. On a nil Recorder it does nothing.
func (r *Recorder) Start() Span {
	if r == nil { // kept apart from start, so that this inlines
		return Span{}
	}
	return r.start()
}

func (r *Recorder) start() (s Span) {
	s.r = r
	s.tid = unix.Gettid()
	s.before = readThreadCounters()
	s.wall0, s.cpu0 = wallSince(r.epoch), threadCPU()
	return s
}

// Mark ends phase i (0 for the first): both clocks are read. Marks must
// come in order, each once; a call with one out of order is not recorded.
func (s *Span) Mark(i int) {
	if s.r != nil {
		s.mark(i)
	}
}

func (s *Span) mark(i int) {
	if i != s.n || i >= len(s.r.phases)-1 {
		s.invalid = true
		return
	}
	s.wall[i], s.cpu[i] = clamp(wallSince(s.r.epoch)-s.wall0), clamp(threadCPU()-s.cpu0)
	s.n++
}

// End ends the last phase and records the call, unless it did not pass
// every mark or its thread changed.
func (s *Span) End() {
	if s.r != nil {
		s.end()
	}
}

func (s *Span) end() {
	last := len(s.r.phases) - 1
	wall, cpu := clamp(wallSince(s.r.epoch)-s.wall0), clamp(threadCPU()-s.cpu0)
	after := readThreadCounters()
	if unix.Gettid() != s.tid {
		s.r.threadChanged.Add(1)
		return
	}
	if s.invalid || s.n != last {
		s.r.incomplete.Add(1)
		return
	}
	s.wall[last], s.cpu[last] = wall, cpu
	s.r.add(record{
		wall: s.wall, cpu: s.cpu,
		involuntary: clamp(after.involuntary - s.before.involuntary),
		voluntary:   clamp(after.voluntary - s.before.voluntary),
		minorFaults: clamp(after.minorFaults - s.before.minorFaults),
		majorFaults: clamp(after.majorFaults - s.before.majorFaults),
	})
}

// clamp fits a non-negative count of nanoseconds (or events) in 32 bits:
// 4.3 s, longer than the runtime waits for a reply.
func clamp(v int64) uint32 {
	switch {
	case v < 0:
		return 0
	case v > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}
