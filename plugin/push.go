package plugin

// Updates sent to the runtime outside a reply, for what changes without a
// container event: a config reload or a CPU going offline changes the
// shared and infra pools under running members.
//
// The handlers never do this (see runtimeinfo.go): an update beside the
// replies may be applied after a newer reply's. Here it is needed, since
// no reply may come for minutes on a quiet node, so it is made safe
// instead: the members are also marked pending, so the next reply carries
// their cpusets as they are then; and once the runtime has applied the
// push, what it sent is compared with what would be sent now (the record
// less its offline CPUs, runnable), and sent again if a decision moved the
// members or a CPU came back online meanwhile, so the last update the
// runtime applies is the current one. It is sent only to runtimes whose NRI
// handles an unsolicited update while a plugin call is pending
// (containerd/nri#301, fixed in v0.12.1); others get it with the next reply.

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

// pushFunc is the NRI stub's UpdateContainers on the current connection.
type pushFunc func([]*api.ContainerUpdate) ([]*api.ContainerUpdate, error)

// pushAttempts bounds the resends when decisions keep moving the members.
const pushAttempts = 5

// setPush sets (nil: clears) how updates reach the runtime. It takes no
// lock: Run calls it right after a connection registers, and a handler
// that takes the plugin's lock then and hangs must not keep Run from its
// bounded way out (exitbudget.go).
func (p *Plugin) setPush(f pushFunc) {
	if f == nil {
		p.push.Store(nil)
		return
	}
	set := &f
	p.push.Store(set)
	// A push made before this one was set found none and left its
	// containers pending for the next reply: a reload queued before the
	// first Synchronize is applied right after it, while the stub's Start,
	// in which the runtime synchronizes, may not have returned yet. On a
	// quiet node no reply comes, so send them now. A push that loads the
	// function after the Store above sends them itself; one that loaded
	// nil before it marked them pending before, so they are read here.
	// From a goroutine, which alone waits for the lock; once the way out
	// has begun it sends nothing (the runtime is being left), nor once
	// another connection replaced this one meanwhile (a reconnect while
	// a handler held the lock): that one's own goroutine sends them, so
	// they are sent once, on the current connection.
	p.exit.late.Add(1)
	proflabel.Go(proflabel.Push, func() {
		defer p.exit.late.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.exit.begun.Load() || p.push.Load() != set {
			return
		}
		if len(p.pending) > 0 {
			p.pushLater(slices.Sorted(maps.Keys(p.pending)))
		}
	})
}

// pushed is the outcome of a push, for a reload's measure: done is closed
// once the runtime has answered it (or it was left to the next reply);
// then updated is how many containers the runtime took the update for.
type pushed struct {
	done    chan struct{}
	updated int
}

// pushLater sends the current cpusets of the containers ids to the runtime
// in the background. Called under the lock. The result is nil when nothing
// is sent (the next reply carries them).
func (p *Plugin) pushLater(ids []string) *pushed {
	if !pushSafe(p.runtime.nriVersion) {
		p.log.Infof("the runtime's NRI (%s) may not take an update outside a reply: %d containers follow their pool at the next reply", p.runtime.nriVersion, len(ids))
		return nil
	}
	out := &pushed{done: make(chan struct{})}
	proflabel.Go(proflabel.Push, func() {
		defer close(out.done)
		out.updated = p.pushNow(ids)
	})
	return out
}

// pushNow sends the updates and returns how many containers the runtime
// took the last one for (0 when it was left to the next reply).
func (p *Plugin) pushNow(ids []string) int {
	updated := 0
	for range pushAttempts {
		p.mu.Lock()
		sent := map[string]string{}
		var updates []*api.ContainerUpdate
		for _, id := range ids {
			if a, ok := p.alloc.Get(id); ok {
				sent[id] = runnable(a.Cpuset(), p.topo.Online).String()
				updates = append(updates, cpuUpdate(a, p.topo.Online, p.cfg.PinMemory))
			}
		}
		p.mu.Unlock()
		send := p.push.Load()
		if send == nil || len(updates) == 0 {
			return updated // the next reply carries them (pending)
		}
		failed, err := (*send)(updates)
		if err != nil {
			p.log.Warnf("updating %d containers that follow their pool: %v; the next reply carries them", len(updates), err)
			return updated
		}
		for _, f := range failed {
			p.log.Warnf("the runtime could not update container %s to its pool's CPUs", f.GetContainerId())
		}
		updated = len(updates) - len(failed)
		p.mu.Lock()
		// What is compared is what would be sent now, not the record: a
		// push built while a CPU was offline names the record less that
		// CPU, and the runtime may apply it after the one giveBack sent
		// when the CPU came back online (same record, more CPUs sent).
		current := true
		for id, cpus := range sent {
			if a, ok := p.alloc.Get(id); ok && runnable(a.Cpuset(), p.topo.Online).String() != cpus {
				current = false
			}
		}
		if current {
			// The runtime has them as they are: the next reply need not
			// carry them again (a reload can move every infra member, and
			// a creation's reply must stay small).
			for id := range sent {
				delete(p.pending, id)
			}
		}
		p.mu.Unlock()
		if current {
			return updated
		}
	}
	return updated
}

// pushSafe tells whether a runtime of this NRI version takes an unsolicited
// update while it waits for the plugin: v0.12.1 and later.
func pushSafe(version string) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 3 {
		return false // "unknown": CRI-O sends none
	}
	n := make([]int, 3)
	for i, s := range parts {
		s, _, _ = strings.Cut(s, "-")
		v, err := strconv.Atoi(s)
		if err != nil {
			return false
		}
		n[i] = v
	}
	return n[0] > 0 || n[1] > 12 || n[1] == 12 && n[2] >= 1
}
