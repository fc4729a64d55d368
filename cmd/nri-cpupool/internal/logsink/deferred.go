package logsink

// A creation's decision line is logged while the plugin holds its lock, on
// the path of the reply the runtime waits for. Writing it was already off
// that path (Async); making it was not: logrus's entry, the message's
// formatting and the text formatter's (the time, the quoting) cost the
// handler more than the queue does (docs/performance.md, issue 45).
// Deferred takes the line's level, time and arguments instead, and Async's
// goroutine makes the line, with the logger's formatter, in its place in
// the queue.

import (
	"bytes"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// Deferred logs lines at info through an Async whose goroutine formats
// them: the same bytes as log.Infof would write, in the same place among
// the other lines, with the time of the call. The arguments are formatted
// after Infof returns, so they must not change after the call (strings,
// numbers). The lines are lost at kill -9 if not yet written, and dropped
// and counted when the queue is full, as any line through Async.
type Deferred struct {
	log       *logrus.Logger
	formatter logrus.Formatter
	out       *Async
	// direct: the logger has hooks or reports its callers, which expect
	// the caller's goroutine; such a logger's lines are logged by it, on
	// the caller's path, as before.
	direct bool
	now    func() time.Time // time.Now; fixed in tests
}

// NewDeferred logs at log's level through out, which must be log's output,
// with the formatter log has now (the daemon sets it once, before this).
func NewDeferred(log *logrus.Logger, out *Async) *Deferred {
	direct := log.ReportCaller
	for _, hooks := range log.Hooks {
		direct = direct || len(hooks) > 0
	}
	return &Deferred{log: log, formatter: log.Formatter, out: out, direct: direct, now: time.Now}
}

// Infof is log.Infof, formatted off the caller's path. Nothing is queued
// when the logger's level leaves info out (it may change at a reload).
func (d *Deferred) Infof(format string, args ...any) {
	if !d.log.IsLevelEnabled(logrus.InfoLevel) {
		return
	}
	if d.direct {
		d.log.Infof(format, args...)
		return
	}
	d.out.writeDeferred(&deferredLine{d: d, level: logrus.InfoLevel, time: d.now(), msgFormat: format, args: args})
}

// deferredLine is what a line is made of.
type deferredLine struct {
	d         *Deferred
	level     logrus.Level
	time      time.Time
	msgFormat string
	args      []any
}

// format makes the line as logrus's Entry.Logf does: the message by
// fmt.Sprintf, an entry without fields, the formatter. buf, if not nil, is
// reused for the result.
func (l *deferredLine) format(buf *bytes.Buffer) []byte {
	e := logrus.NewEntry(l.d.log)
	e.Time, e.Level, e.Message = l.time, l.level, fmt.Sprintf(l.msgFormat, l.args...)
	e.Buffer = buf
	b, err := l.d.formatter.Format(e)
	if err != nil {
		return fmt.Appendf(nil, "nri-cpupool: a log line could not be formatted: %v\n", err)
	}
	return b
}
