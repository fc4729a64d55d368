package logsink

// The NRI library's own log lines ("Created plugin …", "Registering plugin
// …") go, by default, to logrus's standard logger: straight to standard
// error past the queue (Async), in seconds where the daemon's lines are in
// milliseconds, and again at every reconnect while the daemon waits for
// the runtime. NRILogger puts them in the daemon's log.

import (
	"context"
	"sync"

	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/sirupsen/logrus"
)

// NRILogger returns a logger for the NRI library (nrilog.Set) that writes
// to log, with component=nri. Each informational line is logged at info
// the first time its format is seen, at debug after that: the stub says
// the same at each reconnect, which the daemon tells in its own words
// ("cannot reach the runtime …; retrying", "registered with the
// runtime"). Warnings and errors always pass.
func NRILogger(log *logrus.Logger) nrilog.Logger {
	return &nriLogger{log: log.WithField("component", "nri"), seen: map[string]bool{}}
}

type nriLogger struct {
	log *logrus.Entry
	mu  sync.Mutex
	// seen are the formats logged at info: the library's constant
	// strings, so the map stays as small as they are few.
	seen map[string]bool
}

func (l *nriLogger) Debugf(ctx context.Context, format string, args ...any) {
	l.log.WithContext(ctx).Debugf(format, args...)
}

func (l *nriLogger) Infof(ctx context.Context, format string, args ...any) {
	l.mu.Lock()
	again := l.seen[format]
	l.seen[format] = true
	l.mu.Unlock()
	if again {
		l.log.WithContext(ctx).Debugf(format, args...)
		return
	}
	l.log.WithContext(ctx).Infof(format, args...)
}

func (l *nriLogger) Warnf(ctx context.Context, format string, args ...any) {
	l.log.WithContext(ctx).Warnf(format, args...)
}

func (l *nriLogger) Errorf(ctx context.Context, format string, args ...any) {
	l.log.WithContext(ctx).Errorf(format, args...)
}
