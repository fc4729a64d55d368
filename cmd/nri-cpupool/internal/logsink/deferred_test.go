package logsink

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// daemonFormatter is the text formatter as the daemon sets it
// (cli.daemonLog).
func daemonFormatter() logrus.Formatter {
	return &logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "2006-01-02T15:04:05.000Z07:00"}
}

// deferredLog is a daemon's log writing to out through an Async of
// capacity lines, and its Deferred, whose clock says at.
func deferredLog(out io.Writer, capacity int, at time.Time) (*logrus.Logger, *Async, *Deferred) {
	log := logrus.New()
	a := NewAsync(out, capacity)
	log.SetOutput(a)
	log.SetFormatter(daemonFormatter())
	d := NewDeferred(log, a)
	d.now = func() time.Time { return at }
	return log, a, d
}

// decision is a creation's line as the plugin logs it
// (plugin.CreateContainer), with a shared part and a quote to escape.
func decision(d interface{ Infof(string, ...any) }, pod string) {
	d.Infof("container %s: pool %s, CPUs %s%s, mems %s", "default/"+pod+"/c", "exclusive", "4-7,12", ` plus the shared pool's 0-3 "x"`, "0")
}

// TestDeferredLineIsLogrussLine: a deferred line is, byte for byte, the
// line logrus writes for the same call at the same time, with the
// daemon's formatter, in a zone that is not UTC.
func TestDeferredLineIsLogrussLine(t *testing.T) {
	at := time.Date(2026, 12, 6, 2, 3, 4, 567_891_000, time.FixedZone("", 3600))
	var got bytes.Buffer
	_, a, d := deferredLog(&got, 16, at)
	decision(d, "a")
	a.Close()

	var want bytes.Buffer
	ref := logrus.New()
	ref.SetOutput(&want)
	ref.SetFormatter(daemonFormatter())
	decision(ref.WithTime(at), "a")

	require.NotEmpty(t, want.String())
	assert.Equal(t, want.String(), got.String())
	assert.Equal(t, `time="2026-12-06T02:03:04.567+01:00" level=info msg="container default/a/c: pool exclusive, CPUs 4-7,12 plus the shared pool's 0-3 \"x\", mems 0"`+"\n", got.String())
}

// TestDeferredLinesKeepTheirPlace: deferred lines come out where they were
// logged among the logger's other lines, from one goroutine and from many
// at once (the race detector watches the latter).
func TestDeferredLinesKeepTheirPlace(t *testing.T) {
	at := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	log, a, d := deferredLog(&out, 64, at)
	log.Infof("one")
	d.Infof("two %s", "deferred")
	log.Warnf("three")
	d.Infof("four %d", 4)
	log.Infof("five")
	a.Close()
	var msgs []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		msgs = append(msgs, l[strings.Index(l, "msg="):])
	}
	assert.Equal(t, []string{"msg=one", `msg="two deferred"`, "msg=three", `msg="four 4"`, "msg=five"}, msgs)

	var mu sync.Mutex
	var all bytes.Buffer
	log, a, d = deferredLog(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return all.Write(p) }), 4096, at)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				d.Infof("g%d deferred %d", g, i)
				log.Infof("g%d direct %d", g, i)
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			log.SetLevel(logrus.WarnLevel)
			log.SetLevel(logrus.InfoLevel)
		}
	})
	wg.Wait()
	a.Close()
	// Each goroutine's lines are in its order, whichever were logged.
	next := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(all.String()), "\n") {
		var g, i int
		var kind string
		_, err := fmt.Sscanf(l[strings.Index(l, "msg=")+len(`msg="`):], "g%d %s %d", &g, &kind, &i)
		require.NoError(t, err, l)
		key := fmt.Sprintf("g%d %s", g, kind)
		require.Greater(t, i+1, next[key], "%s out of order: %s", key, l)
		next[key] = i + 1
	}
}

// TestDeferredQueuesNothingBelowItsLevel: with the logger at warn, a
// deferred line is not queued (nor formatted); once a reload sets info, it
// is.
func TestDeferredQueuesNothingBelowItsLevel(t *testing.T) {
	out := &gatedWriter{open: make(chan struct{})}
	log, a, d := deferredLog(out, 16, time.Now())
	log.SetLevel(logrus.WarnLevel)
	log.Warnf("first") // taken by the goroutine, which waits on the output
	for len(a.lines) > 0 {
		time.Sleep(time.Millisecond)
	}
	decision(d, "a")
	assert.Zero(t, len(a.lines), "queued below the level")
	log.SetLevel(logrus.InfoLevel)
	decision(d, "b")
	assert.Equal(t, 1, len(a.lines), "queued at info")
	close(out.open)
	a.Close()
	assert.NotContains(t, out.String(), "default/a/c")
	assert.Contains(t, out.String(), "default/b/c")
}

// TestDeferredLinesDroppedAndCounted: with the output stuck and the queue
// full, deferred lines are dropped like written ones and counted with
// them, and the count comes out where they went missing.
func TestDeferredLinesDroppedAndCounted(t *testing.T) {
	out := &gatedWriter{open: make(chan struct{})}
	log, a, d := deferredLog(out, 2, time.Now())
	returned := make(chan struct{})
	go func() {
		for i := range 6 {
			if i%2 == 0 {
				d.Infof("line %d", i)
			} else {
				log.Infof("line %d", i)
			}
		}
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("a deferred line waited for a stuck output")
	}
	close(out.open)
	for len(a.lines) > 0 { // the output catches up
		time.Sleep(time.Millisecond)
	}
	d.Infof("after")
	a.Close()
	var msgs []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if i := strings.Index(l, "msg="); i >= 0 {
			l = l[i:]
		}
		msgs = append(msgs, l)
	}
	require.NoError(t, checkDropped(msgs, `msg="line %d"`, 6, 2, "msg=after"), "%q", msgs)
}

// TestDeferredAfterCloseWritesDirectly: a deferred line logged after the
// queue closed (a goroutine still shutting down) is formatted and written
// at once, not lost.
func TestDeferredAfterCloseWritesDirectly(t *testing.T) {
	var out bytes.Buffer
	_, a, d := deferredLog(&out, 4, time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC))
	a.Close()
	d.Infof("late")
	assert.Equal(t, "time=\"2026-12-06T02:00:00.000Z\" level=info msg=late\n", out.String())
}

// countingHook counts the entries it is fired for.
type countingHook struct {
	mu    sync.Mutex
	fired int
}

func (h *countingHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h *countingHook) Fire(*logrus.Entry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fired++
	return nil
}

// TestDeferredLogsDirectlyWithHooks: a logger with hooks (the daemon's has
// none) logs its deferred lines itself, on the caller's path, so its hooks
// fire there as for any line.
func TestDeferredLogsDirectlyWithHooks(t *testing.T) {
	out := &gatedWriter{open: make(chan struct{})}
	log := logrus.New()
	a := NewAsync(out, 16)
	log.SetOutput(a)
	log.SetFormatter(daemonFormatter())
	h := &countingHook{}
	log.AddHook(h)
	d := NewDeferred(log, a)
	decision(d, "a")
	h.mu.Lock()
	assert.Equal(t, 1, h.fired, "the hook fired on the caller's path")
	h.mu.Unlock()
	close(out.open)
	a.Close()
	assert.Contains(t, out.String(), "default/a/c")
}
