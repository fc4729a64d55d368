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

	// direct serialises the lines written after Close, once the queue
	// is drained: the output need not be safe for concurrent writes.
	direct sync.Mutex

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
// After Close it writes p directly, once the queue is drained.
func (a *Async) Write(p []byte) (int, error) {
	a.mu.Lock()
	if !a.closed {
		a.enqueue(queued{line: append([]byte(nil), p...)})
		a.mu.Unlock()
		return len(p), nil
	}
	a.mu.Unlock()
	return a.writeDirect(p)
}

// writeDeferred queues a line to format, in order with the written ones;
// after Close it formats and writes it directly, once the queue is
// drained.
func (a *Async) writeDeferred(l *deferredLine) {
	a.mu.Lock()
	if !a.closed {
		a.enqueue(queued{deferred: l})
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	a.writeDirect(l.format(nil))
}

// writeDirect writes a line logged after Close: after the lines queued
// before it (a line logged while Close drains the queue waits for the
// drain), and one at a time.
func (a *Async) writeDirect(p []byte) (int, error) {
	<-a.done
	a.direct.Lock()
	defer a.direct.Unlock()
	return a.out.Write(p)
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
	// Closed: Close set closed, under mu, before it closed the queue, so
	// nothing counts drops any more.
	a.notice(a.dropped)
}

func (a *Async) notice(dropped int) {
	if dropped > 0 {
		fmt.Fprintf(a.out, "nri-cpupool: %d log lines dropped: the log output did not keep up\n", dropped)
	}
}

// Close writes what is queued (and how many lines were dropped last),
// then returns; later lines are written directly.
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
}
