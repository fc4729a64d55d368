// Package logsink writes the daemon's log lines off the caller's path.
//
// The plugin logs each decision while it holds its lock, and its standard
// error is a pipe to journald (or the container runtime's log). A pipe
// whose reader stalls (journald restarting or overloaded) blocks the writer
// once its buffer is full, and a handler blocked there makes the runtime
// give up after 2 s and create the container unpinned. Async queues lines
// and writes them from one goroutine; when the queue is full it drops lines
// and says how many once the output keeps up again. Deferred hands it
// lines that its goroutine formats too.
package logsink

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

// Async is an io.Writer (for logrus.SetOutput) that never blocks on its
// output. Each Write must be one whole line, as logrus writes them.
type Async struct {
	out   io.Writer
	lines chan queued
	done  chan struct{}

	mu      sync.Mutex
	closed  bool
	dropped int // lines dropped since the last one queued

	// formatted is the goroutine's buffer for deferred lines, reused from
	// one to the next.
	formatted bytes.Buffer
}

// queued is a line, written or to format (deferred), and how many were
// dropped just before it, so that the notice comes out where the lines
// went missing.
type queued struct {
	line     []byte
	deferred *deferredLine
	dropped  int
}

// NewAsync writes to out through a queue of up to capacity lines.
func NewAsync(out io.Writer, capacity int) *Async {
	a := &Async{out: out, lines: make(chan queued, capacity), done: make(chan struct{})}
	go a.run()
	return a
}

// Write queues a copy of p (the caller may reuse it) and returns at once.
// After Close it writes p directly.
func (a *Async) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return a.out.Write(p)
	}
	a.enqueue(queued{line: append([]byte(nil), p...)})
	return len(p), nil
}

// writeDeferred queues a line to format, in order with the written ones;
// after Close it formats and writes it directly.
func (a *Async) writeDeferred(l *deferredLine) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		a.out.Write(l.format(nil))
		return
	}
	a.enqueue(queued{deferred: l})
}

// enqueue queues q, or counts it dropped when the queue is full. Called
// under mu.
func (a *Async) enqueue(q queued) {
	q.dropped = a.dropped
	select {
	case a.lines <- q:
		a.dropped = 0
	default:
		a.dropped++
	}
}

func (a *Async) run() {
	proflabel.Worker(proflabel.Log).Apply()
	defer close(a.done)
	for q := range a.lines {
		a.notice(q.dropped)
		line := q.line
		if q.deferred != nil {
			a.formatted.Reset()
			line = q.deferred.format(&a.formatted)
		}
		a.out.Write(line)
	}
}

func (a *Async) notice(dropped int) {
	if dropped > 0 {
		fmt.Fprintf(a.out, "nri-cpupool: %d log lines dropped: the log output did not keep up\n", dropped)
	}
}

// Close writes what is queued, then returns; later lines are written
// directly.
func (a *Async) Close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	close(a.lines)
	a.mu.Unlock()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notice(a.dropped)
	a.dropped = 0
}
