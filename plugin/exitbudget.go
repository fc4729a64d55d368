package plugin

// The daemon's way out is bounded as a whole. Run's last steps (the
// status "stopped", the last state write), the caller's own last waits
// (WaitOnTheWayOut: the DRA driver's and the pod Events' last work) and
// Close share one budget, the state writer's closeWait (5 s): each step
// is waited for at most what the steps before it left. Steps a handler
// stuck under the plugin's lock (or a hung disk) would keep waiting are
// then left to the process's exit, which ends them as a kill -9 would:
// nothing on the way out must finish for the state to be whole (see
// stateWriter.Close). A budget rather than a deadline: in tests the
// plugin's Close may come long after Run returned, and only the time
// spent on the way out counts.

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// exitBudget is what the way out has spent of its bound.
type exitBudget struct {
	mu    sync.Mutex
	spent time.Duration
	// late are the steps still under way past the bound; the daemon's
	// exit ends them, a test waits for them before its directories go.
	late sync.WaitGroup
	// begun is set by the way out's first step, or before it by start
	// giving up a reconnect as Run's context ends: a runtime's Configure
	// or Synchronize that comes after it (a reconnect Run gave up) is
	// refused, so that it cannot load, place, pin or write state, nor
	// reload, beside or after Close.
	begun atomic.Bool
}

// errExitBoundReached: a step of the way out did not finish within what
// was left of its bound.
var errExitBoundReached = errors.New("the daemon's way out reached its bound")

// errStopping: the daemon's way out has begun; a runtime's late Configure
// or Synchronize gets it.
var errStopping = errors.New("the daemon is stopping")

// left is what remains of bound.
func (b *exitBudget) left(bound time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bound - b.spent
}

func (b *exitBudget) spend(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent += d
}

// onTheWayOut runs step, what the way out does next, and waits for it at
// most what is left of the way out's bound; past that it returns an
// error wrapping errExitBoundReached and the step goes on alone.
func (p *Plugin) onTheWayOut(what string, step func() error) error {
	p.exit.begun.Store(true)
	bound := p.writer.closeWait
	left := p.exit.left(bound)
	start := time.Now()
	done := make(chan error, 1)
	p.exit.late.Add(1)
	go func() {
		defer p.exit.late.Done()
		done <- step()
	}()
	if left > 0 {
		t := time.NewTimer(left)
		defer t.Stop()
		select {
		case err := <-done:
			p.exit.spend(time.Since(start))
			return err
		case <-t.C:
		}
	}
	p.exit.spend(max(left, 0))
	return fmt.Errorf("%w (%s in all): %s has not finished, and is left to the process's exit (the state file on disk is whole; the next start re-reads the runtime)", errExitBoundReached, bound, what)
}

// WaitOnTheWayOut waits for done, the end of what the caller does on the
// daemon's way out beside the plugin (the DRA driver's last claims
// write), at most what is left of the way out's bound (5 s in all, Run's
// last writes and Close included), and logs it when it gives up.
func (p *Plugin) WaitOnTheWayOut(what string, done <-chan struct{}) {
	err := p.onTheWayOut(what, func() error {
		<-done
		return nil
	})
	if err != nil {
		p.log.Errorf("%v", err)
	}
}
