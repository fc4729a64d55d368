package logsink

import (
	"bytes"
	"fmt"
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
	// The writer goroutine may have taken line 0 before the queue filled,
	// so 4 or 5 lines were kept.
	if len(got) < 6 || got[0] != "line 0" {
		t.Fatalf("got %q", got)
	}
	kept := len(got) - 2
	for i := 0; i < kept; i++ {
		if want := fmt.Sprintf("line %d", i); got[i] != want {
			t.Fatalf("line %d: got %q, want %q (all: %q)", i, got[i], want, got)
		}
	}
	if want := fmt.Sprintf("nri-cpupool: %d log lines dropped: the log output did not keep up", 10-kept); got[kept] != want {
		t.Errorf("got %q, want %q", got[kept], want)
	}
	if got[kept+1] != "after" {
		t.Errorf("last line %q", got[kept+1])
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

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
