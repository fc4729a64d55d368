package logsink

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatedWriter blocks every write until open is closed, like a pipe whose
// reader stalled.
type gatedWriter struct {
	open chan struct{}
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gatedWriter) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// TestWriteDoesNotWaitForTheOutput: with the output stuck, writes return;
// lines beyond the queue are dropped and counted; once the output moves,
// the queued lines come out in order, then the count, then later lines.
func TestWriteDoesNotWaitForTheOutput(t *testing.T) {
	out := &gatedWriter{open: make(chan struct{})}
	a := NewAsync(out, 4)
	returned := make(chan struct{})
	go func() {
		buf := []byte("line 0\n")
		for i := 0; i < 10; i++ {
			buf = fmt.Appendf(buf[:0], "line %d\n", i) // reused, as logrus does
			a.Write(buf)
		}
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Write waited for a stuck output")
	}
	close(out.open)
	for len(a.lines) > 0 { // the output catches up
		time.Sleep(time.Millisecond)
	}
	a.Write([]byte("after\n"))
	a.Close()
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := checkDropped(got, "line %d", 10, 4, "after"); err != nil {
		t.Fatalf("%v (all: %q)", err, got)
	}
}

// checkDropped checks the output of n lines logged (format, with i from 0
// to n-1) into a queue of capacity lines while the output was stuck, then
// last once it moved: the logged lines come in order, each gap replaced by
// one notice counting exactly the lines missing there; at least one was
// dropped; at most capacity+1 were kept (the queue, and the slot the writer
// goroutine frees when it takes its first line and blocks), so at most two
// notices; and last comes last. Which lines are kept depends on when the
// writer takes that first line, so the check accepts every such
// interleaving and nothing else.
func checkDropped(lines []string, format string, n, capacity int, last string) error {
	if len(lines) == 0 || lines[len(lines)-1] != last {
		return fmt.Errorf("the last line is not %q", last)
	}
	next, droppedTotal, kept, notices := 0, 0, 0, 0
	for i, l := range lines[:len(lines)-1] {
		var k int
		if _, err := fmt.Sscanf(l, format, &k); err == nil {
			if k != next {
				return fmt.Errorf("line %d: got %q, want %q", i, l, fmt.Sprintf(format, next))
			}
			next++
			kept++
			continue
		}
		if _, err := fmt.Sscanf(l, "nri-cpupool: %d log lines dropped: the log output did not keep up", &k); err != nil || k <= 0 {
			return fmt.Errorf("line %d: %q is neither a logged line nor a drop notice", i, l)
		}
		if i == 0 || strings.HasPrefix(lines[i-1], "nri-cpupool: ") {
			return fmt.Errorf("line %d: a notice that does not follow a logged line", i)
		}
		next += k
		droppedTotal += k
		notices++
	}
	if next != n {
		return fmt.Errorf("%d lines logged, but the output accounts for %d", n, next)
	}
	if kept < capacity || kept > capacity+1 {
		return fmt.Errorf("%d lines kept by a queue of %d with the output stuck; it keeps %d or %d", kept, capacity, capacity, capacity+1)
	}
	if notices > 2 {
		return fmt.Errorf("%d drop notices; lines go missing in at most two runs, before and after the slot the writer frees", notices)
	}
	if droppedTotal == 0 {
		return fmt.Errorf("no line was dropped with the output stuck")
	}
	return nil
}

// TestCheckDropped: the check accepts the interleavings a stuck output can
// produce (a notice in the middle, when the writer frees a slot late) and
// rejects a lost, repeated or miscounted line, and more or fewer kept
// lines than the queue allows.
func TestCheckDropped(t *testing.T) {
	notice := func(n int) string {
		return fmt.Sprintf("nri-cpupool: %d log lines dropped: the log output did not keep up", n)
	}
	lines := func(from, to int) []string {
		var l []string
		for i := from; i < to; i++ {
			l = append(l, fmt.Sprintf("line %d", i))
		}
		return l
	}
	cat := func(parts ...[]string) []string {
		var l []string
		for _, p := range parts {
			l = append(l, p...)
		}
		return l
	}
	for _, tc := range []struct {
		name  string
		lines []string
		ok    bool
	}{
		{"notice last", cat(lines(0, 5), []string{notice(5), "after"}), true},
		{"notice in the middle (CI, 2026-12-06)", cat(lines(0, 4), []string{notice(5), "line 9", "after"}), true},
		{"miscounted", cat(lines(0, 4), []string{notice(4), "line 9", "after"}), false},
		{"a line lost without a notice", cat(lines(0, 4), lines(5, 10), []string{"after"}), false},
		{"nothing dropped", cat(lines(0, 10), []string{"after"}), false},
		{"repeated line", cat(lines(0, 4), []string{"line 3", notice(6), "after"}), false},
		{"notice first", cat([]string{notice(1)}, lines(1, 10), []string{"after"}), false},
		{"after missing", cat(lines(0, 5), []string{notice(5)}), false},
		{"two notices", cat(lines(0, 4), []string{notice(1), "line 5", notice(4), "after"}), true},
		{"two notices in a row", cat(lines(0, 4), []string{notice(1), notice(5), "after"}), false},
		{"more kept than the queue holds", cat(lines(0, 7), []string{notice(3), "after"}), false},
		{"one more kept than the queue and the freed slot", cat(lines(0, 6), []string{notice(4), "after"}), false},
		{"fewer kept than the queue holds", cat(lines(0, 3), []string{notice(7), "after"}), false},
		{"three notices", cat(lines(0, 2), []string{notice(1), "line 3", notice(1), "line 5", notice(4), "after"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkDropped(tc.lines, "line %d", 10, 4, "after"); (err == nil) != tc.ok {
				t.Errorf("checkDropped(%q) = %v, want ok=%v", tc.lines, err, tc.ok)
			}
		})
	}
}

// TestCloseFlushesAndLaterLinesGoDirect: Close writes every queued line;
// a line logged after Close (a goroutine still shutting down) is written,
// not lost, and a second Close is harmless.
func TestCloseFlushesAndLaterLinesGoDirect(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	a := NewAsync(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) }), 100)
	for i := 0; i < 50; i++ {
		a.Write(fmt.Appendf(nil, "%d\n", i))
	}
	a.Close()
	a.Write([]byte("late\n"))
	a.Close()
	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 51 || lines[49] != "49" || lines[50] != "late" {
		t.Fatalf("got %d lines: %q", len(lines), lines)
	}
}

// TestLineDuringCloseAfterQueuedLines: a line logged while Close drains
// the queue (after Close began, before it returned) comes out after the
// lines queued before it, not ahead of them.
func TestLineDuringCloseAfterQueuedLines(t *testing.T) {
	gate := make(chan struct{})
	var mu sync.Mutex
	var lines []string
	a := NewAsync(writerFunc(func(p []byte) (int, error) {
		if strings.HasPrefix(string(p), "queued") {
			<-gate // the output stalls on the queued lines only
		}
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, strings.TrimSpace(string(p)))
		return len(p), nil
	}), 10)
	for i := range 3 {
		a.Write(fmt.Appendf(nil, "queued %d\n", i))
	}
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	for began := false; !began; {
		a.mu.Lock()
		began = a.closed
		a.mu.Unlock()
	}
	late := make(chan struct{})
	go func() { a.Write([]byte("late\n")); close(late) }()
	time.Sleep(10 * time.Millisecond) // an early write of the late line would be in by now
	close(gate)
	<-closed
	<-late
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"queued 0", "queued 1", "queued 2", "late"}; !slices.Equal(lines, want) {
		t.Fatalf("got %q, want %q", lines, want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
