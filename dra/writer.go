package dra

import (
	"context"
	"time"
)

// retry is a backoff: the first wait, doubled after each failure up to max.
type retry struct{ initial, max time.Duration }

// defaultRetry paces the claims file's background writes after a failure,
// as the plugin's state writer does, and the attempts to serve the kubelet.
var defaultRetry = retry{initial: 50 * time.Millisecond, max: 5 * time.Second}

// keepWritten writes the container bindings Bind made (and a release
// Unprepare could not write) in the background, until ctx ends; then it
// writes and syncs the claims file.
//
// A failed write is retried with backoff until one succeeds: a binding
// that never reached the file is lost to a kill -9, and the restarted
// driver would give the request to the next reserved pod that shows the
// token, although its owner still runs on the CPUs (Synchronize binds the
// running owners again, see the plugin's rebindClaims, but only what the
// driver still has in memory can be written). A change made during the
// backoff is carried by the retry: every write takes the claims as they
// are then.
func (d *Driver) keepWritten(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	wait, failing, armed := d.retry.initial, 0, false
	for {
		select {
		case <-ctx.Done():
			return d.Flush()
		case <-d.dirty:
			if armed {
				continue // the retry takes this change too
			}
		case <-timer.C:
			armed = false
		}
		if err := d.save(); err != nil {
			failing++
			d.log.Errorf("DRA: %v (attempt %d; container bindings are kept in memory, retrying in %s)", err, failing, wait)
			timer.Reset(wait)
			armed = true
			wait = min(wait*2, d.retry.max)
			continue
		}
		if failing > 0 {
			d.log.Infof("DRA: claims written again after %d failed attempts", failing)
			failing = 0
		}
		wait = d.retry.initial
	}
}

// Flush writes the claims as they are now (the bindings, the unanswered
// marks cleared since the last write) and makes the file durable: what
// the background writer does when it ends.
func (d *Driver) Flush() error {
	err := d.save()
	if serr := d.store.sync(); err == nil {
		err = serr
	}
	return err
}
