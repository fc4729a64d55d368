package plugin

// Readiness: what the daemon's /readyz asks of the plugin, and the gauges
// that tell the same to Prometheus (cpupool_runtime_connected,
// cpupool_state_write_failing, cpupool_handler_oldest_inflight_seconds).
// Each answer is read from atomics: a probe or a scrape never waits for
// the plugin's lock, which a long decision or Synchronize may hold, nor
// for the state writer's, which a stalled disk may hold. A daemon that
// hangs instead of failing must fail them too: a handler that does not
// answer within the runtime's request timeout, a state write that does
// not return.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
)

// runtimeConn follows the connection to the runtime for readiness. Run
// counts its connection attempts; Synchronize records the attempt it
// belongs to, so that a runtime that restarted and has not synchronized
// the plugin again does not count as synchronized by the old connection's
// Synchronize.
type runtimeConn struct {
	// attempt counts Run's connections, the current one included.
	attempt atomic.Uint64
	// synced is the attempt the runtime last synchronized; 0 before.
	synced atomic.Uint64
	// now is the connection's state as noteRuntime last recorded it; nil
	// before Run first tried.
	now atomic.Pointer[RuntimeStatus]
	// requestTimeout is the runtime's timeout for a plugin's reply, in
	// nanoseconds, as its Configure told the stub; 0 until then.
	requestTimeout atomic.Int64
	// inflight are the handlers under way (instrumented enters them).
	inflight handlersInFlight
}

// timeout is how long the runtime waits for the plugin's reply before it
// gives up on it: what its Configure said, NRI's default before that (or
// if it said nothing). Past it the runtime has created the container
// without the plugin's answer (unpinned) or refused it, and by default
// dropped the connection.
func (c *runtimeConn) timeout() time.Duration {
	if t := c.requestTimeout.Load(); t > 0 {
		return time.Duration(t)
	}
	return api.DefaultPluginRequestTimeout
}

// ready is nil when the plugin is registered with the runtime and the
// runtime synchronized it on this connection, and no handler has been
// under way longer than the runtime waits for it; otherwise it says why
// not.
func (c *runtimeConn) ready() error {
	if age, handler := c.inflight.oldest(); age > c.timeout() {
		return fmt.Errorf("the %s handler has not answered for %s, past the runtime's request timeout of %s: the runtime gave up on it and creates containers without the plugin (unpinned) or refuses them",
			handler, age.Round(time.Millisecond), c.timeout())
	}
	rs := c.now.Load()
	if rs == nil {
		return errors.New("not connected to the runtime yet")
	}
	switch rs.State {
	case RuntimeRegistered:
		if a := c.attempt.Load(); a == 0 || c.synced.Load() != a {
			return fmt.Errorf("registered with the runtime at %s, which has not synchronized the plugin yet", rs.Socket)
		}
		return nil
	case RuntimeWaiting:
		why := rs.Detail
		if why == "" {
			why = "waiting for the runtime"
		}
		return fmt.Errorf("%s (%s since %s)", why, RuntimeWaiting, rs.Since.Format(time.RFC3339))
	default:
		return fmt.Errorf("the connection to the runtime is %s", rs.State)
	}
}

// handlersInFlight follows the handlers under way, so that a handler that
// does not answer (stuck on the plugin's lock behind a hung host write, a
// bug) is seen while it hangs: the handler histogram observes a handler
// only when it returns. Each handler takes a free slot while it runs and
// writes there when it started; a probe or a scrape reads the oldest. On
// the reply path it costs one compare-and-swap to enter and one store to
// leave: no lock, no allocation. A handler that finds every slot taken
// (more than len(slots) at once, which the plugin's lock serializes
// anyway) is not followed; the ones that hold the slots came first, and
// a hang keeps them.
type handlersInFlight struct {
	// slots hold 0 when free, else inflightMark(start, handler).
	slots [16]atomic.Int64
}

// monoOrigin is the origin of the slots' times: a fixed instant whose
// monotonic reading makes start.Sub(monoOrigin) immune to the wall clock
// being set. Set once at start, never changed.
var monoOrigin = time.Now()

// inflightMark packs a start time (since monoOrigin, plus one so that no
// mark is 0) and the handler's index in handlerNames (4 bits) into a slot.
func inflightMark(start time.Time, handler int) int64 {
	return (int64(start.Sub(monoOrigin))+1)<<4 | int64(handler&0xf)
}

// enter records a handler started at start; the slot it returns is for
// leave (-1: none was free).
func (h *handlersInFlight) enter(start time.Time, handler int) int {
	mark := inflightMark(start, handler)
	for i := range h.slots {
		if h.slots[i].CompareAndSwap(0, mark) {
			return i
		}
	}
	return -1
}

// leave frees the slot enter returned.
func (h *handlersInFlight) leave(slot int) {
	if slot >= 0 {
		h.slots[slot].Store(0)
	}
}

// oldest is how long the oldest handler under way has run, and its name;
// 0 and "" when none is.
func (h *handlersInFlight) oldest() (time.Duration, string) {
	var first int64
	for i := range h.slots {
		if m := h.slots[i].Load(); m != 0 && (first == 0 || m>>4 < first>>4) {
			first = m
		}
	}
	if first == 0 {
		return 0, ""
	}
	age := time.Since(monoOrigin) - time.Duration(first>>4-1)
	name := "unknown"
	if i := int(first & 0xf); i < len(handlerNames) {
		name = handlerNames[i]
	}
	return max(age, 0), name
}

// RuntimeReady is nil when the plugin is registered with the runtime and
// the runtime has synchronized it on that connection: containers are then
// pinned as they are created. Otherwise it says what the plugin waits for
// (the runtime's socket, its Synchronize) or that it stopped.
func (p *Plugin) RuntimeReady() error { return p.conn.ready() }

// StateWriterReady is nil unless the state writer's last attempt to write
// the state (or the kubelet grants) file, or to sync it, failed, or one
// under way has not returned for 10 s (stateWriteStallAfter); the error
// is that failure. The writer retries with backoff, and containers are
// still pinned meanwhile, but a restart of the daemon would lose the
// decisions not yet on disk.
func (p *Plugin) StateWriterReady() error { return p.writer.ready() }

// writerFailure is the state writer's failing step.
type writerFailure struct {
	what  string
	err   error
	since time.Time
	tries int
}

func (f *writerFailure) Error() string {
	return fmt.Sprintf("%s failing since %s (%d attempts): %v", f.what, f.since.Format(time.RFC3339), f.tries, f.err)
}

func (f *writerFailure) Unwrap() error { return f.err }

// noteFailure records a failed step: the first failure of a run of them
// keeps its time, later ones count.
func noteFailure(slot *atomic.Pointer[writerFailure], what string, err error) {
	f := &writerFailure{what: what, err: err, since: time.Now().UTC(), tries: 1}
	if prev := slot.Load(); prev != nil {
		f.since, f.tries = prev.since, prev.tries+1
	}
	slot.Store(f)
}

// ready is nil unless the writer's last write or its last sync failed,
// or one under way has not returned for stallAfter (it would never fail:
// a hung disk). They are kept apart, so that a write that succeeds
// between two fsyncs that fail does not make the writer look well in
// between.
func (w *stateWriter) ready() error {
	if b := w.busy.Load(); b != nil {
		if age := time.Since(b.since); age > w.stallAfter {
			return fmt.Errorf("%s has not returned for %s (a hung disk or file system?); decisions since the last write are not on disk", b.what, age.Round(time.Second))
		}
	}
	if f := w.writeFailure.Load(); f != nil {
		return f
	}
	if f := w.syncFailure.Load(); f != nil {
		return f
	}
	return nil
}
