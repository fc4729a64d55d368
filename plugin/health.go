package plugin

// Readiness: what the daemon's /readyz asks of the plugin, and the gauges
// that tell the same to Prometheus (cpupool_runtime_connected,
// cpupool_state_write_failing). Each answer is read from atomics: a probe
// or a scrape never waits for the plugin's lock, which a long decision or
// Synchronize may hold, nor for the state writer's, which a stalled disk
// may hold.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
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
}

// ready is nil when the plugin is registered with the runtime and the
// runtime synchronized it on this connection; otherwise it says why not.
func (c *runtimeConn) ready() error {
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

// RuntimeReady is nil when the plugin is registered with the runtime and
// the runtime has synchronized it on that connection: containers are then
// pinned as they are created. Otherwise it says what the plugin waits for
// (the runtime's socket, its Synchronize) or that it stopped.
func (p *Plugin) RuntimeReady() error { return p.conn.ready() }

// StateWriterReady is nil unless the state writer's last attempt to write
// the state (or the kubelet grants) file, or to sync it, failed; the error
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

// ready is nil unless the writer's last write or its last sync failed.
// They are kept apart, so that a write that succeeds between two fsyncs
// that fail does not make the writer look well in between.
func (w *stateWriter) ready() error {
	if f := w.writeFailure.Load(); f != nil {
		return f
	}
	if f := w.syncFailure.Load(); f != nil {
		return f
	}
	return nil
}
